package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/host/webhook"
	"github.com/yunikorn-userinfo/userinfo/internal/auditlog"
	"github.com/yunikorn-userinfo/userinfo/internal/yunikorn/audit"
	"github.com/yunikorn-userinfo/userinfo/policy/workloads"
)

// auditFlags are the flags of `audit`.
type auditFlags struct {
	kubeconfig    string
	kubeContext   string
	namespace     string
	output        string
	apply         bool
	schedulerName string
	uniqueAppIDs  bool
	completing    time.Duration
	pageSize      int64
	progressEvery int
	quiet         bool
	queueCheck    bool
	ykNamespace   string
	policyGroup   string
	partition     string
	timeout       time.Duration
	settingsPath  string
	settingsJSON  string
	yunikornURL   string
	auditLog      string
	webhookName   string
}

func newAuditCommand(a *app) *cobra.Command {
	f := &auditFlags{}
	cmd := &cobra.Command{
		Use:   "audit --kubeconfig KUBECONFIG [-n NAMESPACE] [-s SETTINGS | --settings-json JSON] [-o table|json|adopt|openreports|policyreport [--apply]] [--yunikorn URL]\n  " + binaryName + " audit --audit-log FILE [-n NAMESPACE] [--webhook NAME] [-o table|json]",
		Short: "Find the Pods and workloads of a cluster whose user.info YuniKorn cannot trust",
		Long: `Read every Pod and workload template of the cluster (or of --namespace) that
YuniKorn schedules (spec.schedulerName --scheduler-name) and report:

  user-info-missing         no yunikorn.apache.org/user.info annotation
  user-info-invalid         a value the policy would refuse (not a JSON object
                            with a non-empty string "user", keys not exactly
                            "user" and "groups", duplicated, ...)
  user-info-owner-mismatch  a Pod whose user.info differs from the template of
                            its controller (ReplicaSet, StatefulSet, DaemonSet,
                            Job, ReplicationController), or an object an
                            operator made whose user.info differs from what
                            its controller of a custom kind records
  application-id-shared     Pods of one YuniKorn application naming different
                            users (the application IDs as the shim reads them;
                            they are cluster-wide: one spanning namespaces is
                            also reported once for the whole cluster)
  queue-not-allowed         a Pod whose user may submit to no queue YuniKorn
                            would place its application in, under the current
                            queues.yaml (--queue-check, from the ConfigMaps of
                            --yunikorn-namespace)
  charged-user-mismatch     with --yunikorn URL: an application that YuniKorn's
                            REST API says is charged to another user than its
                            Pods' user.info names, or to nobody because a Pod
                            records no one (one finding per application, on
                            its first such Pod, saying why and what to do)

With the policy's settings (-s FILE or --settings-json, as run and serve
take them, checked by the embedded policy's validate_settings), the custom
kinds of their "workloads" (presets kuberay, spark, kubeflow-training,
kubeflow-trainer, jobset, leaderworkerset, or {group, kind, paths}) are
audited too: every pod template at the kind's paths and the object's own
annotations must record one valid user.info, and what their operators
create (Pods, Jobs, RayClusters, ...) must record what its controller
records. A kind the API server does not serve (CRD not installed) is
reported once and skipped. With their "scheduling" setting on, Pods and
templates of any scheduler in a namespace it processes (processNamespaces,
bypassNamespaces, the namespace's enableYuniKorn annotation) are audited
too: the policy sends such Pods to YuniKorn.

Workloads made before the policy was installed, while it was down, in
monitor mode, or in namespaces it does not cover are what this finds.
Objects are listed --page-size at a time and only per-application
aggregates are kept, so memory grows with the findings and the number of
applications, not with the number of Pods. Progress goes to stderr.

-o adopt lists every object that records no owner and has no controller
whose adoption would cover it (a bare Pod, a Deployment, a CronJob, a
custom kind of the settings' workloads with no record at all), each with
the kubectl command an adopter (the policy's settings.adopters) runs to
record its owner, and where to find who that is: the owner is a
placeholder to replace (the API server's audit log names who created it;
a legacy yunikorn.apache.org/username label is shown, never taken as the
owner; docs/BEHAVIOUR.md §4.13).

Output: a table, JSON (-o json), adoption commands (-o adopt), or reports: one per namespace and, when
every namespace was audited, one cluster-scoped report for what no
namespace holds alone (applications across namespaces, custom kinds not
audited), as OpenReports (-o openreports: openreports.io/v1alpha1 Report
and ClusterReport, what Kubewarden 1.30+ and Kyverno 1.15+ write) or as
the older wgpolicyk8s.io/v1alpha2 PolicyReport and ClusterPolicyReport
(-o policyreport). They are printed as YAML or, with --apply, written to
the cluster (created or replaced; the report an earlier audit left in a
namespace with nothing audited any more, or the cluster-scoped one when
nothing cluster-wide is left, is deleted); --apply first checks that the
cluster serves the API and names the missing CRD if not. The exit code is
0 whatever was found; 1 on errors. See docs/AUDIT.md.

With --audit-log FILE (- for stdin), no cluster is read: the API server's
audit log (--audit-log-format=json, level Metadata or above for the
requests the webhook sees) is searched for the requests a webhook in
monitor mode admitted although it would have refused them (its audit
annotation "monitor: would be refused"), and each is listed with its
object, verb, user, the API server's answer and the rule that would have
refused it. Every stored create the log records at level Request or above
(and every update recorded at RequestResponse, with the object before it)
that supplied a user.info value is also asked again of the embedded
policy, with the settings of -s or --settings-json: one it refuses (a
value its submitter could not have supplied, made while the policy was
absent) is listed with the policy's rule, its verb marked "(replay)".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runAudit(cmd, f)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", `the cluster to audit ("in-cluster": the Pod's service account); required`)
	fs.StringVar(&f.kubeContext, "context", "", "the kubeconfig context to use (default: its current context)")
	fs.StringVarP(&f.namespace, "namespace", "n", "", "audit this namespace only (default: all namespaces)")
	fs.StringVarP(&f.output, "output", "o", "table", "output format: table, json, adopt (the command that adopts each object without an owner), openreports or policyreport")
	fs.BoolVar(&f.apply, "apply", false, "with -o openreports or -o policyreport: write the reports to the cluster instead of printing them")
	fs.StringVar(&f.schedulerName, "scheduler-name", "yunikorn", "the scheduler name of YuniKorn: Pods and templates of other schedulers are skipped")
	fs.BoolVar(&f.uniqueAppIDs, "unique-app-ids", false, "YuniKorn runs with admissionController.filtering.generateUniqueAppId: Pods without an application ID do not share their namespace's")
	fs.DurationVar(&f.completing, "completing-timeout", audit.DefaultCompletingTimeout, "YuniKorn's completingTimeout: a finished Pod counts as its application's for this long after it finished (0: not at all)")
	fs.Int64Var(&f.pageSize, "page-size", 500, "objects per list request")
	fs.IntVar(&f.progressEvery, "progress-every", 5000, "a progress line on stderr every this many objects of a kind")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress lines")
	fs.BoolVar(&f.queueCheck, "queue-check", true, "place every Pod as YuniKorn would under its current queue configuration, and report users who may submit to no queue they would get")
	fs.StringVar(&f.ykNamespace, "yunikorn-namespace", "yunikorn", "with --queue-check: the namespace of YuniKorn's yunikorn-configs and yunikorn-defaults ConfigMaps")
	fs.StringVar(&f.policyGroup, "policy-group", "queues", "with --queue-check: YuniKorn's service.policyGroup (the ConfigMap key POLICY-GROUP.yaml)")
	fs.StringVar(&f.partition, "partition", "default", "with --queue-check: the partition Pods are placed in")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Minute, "the deadline of the whole audit")
	fs.StringVarP(&f.settingsPath, "settings-path", "s", "", "the policy's settings file, YAML or JSON: its workloads' custom kinds are audited too")
	fs.StringVar(&f.settingsJSON, "settings-json", "", "the policy's settings as a JSON object: its workloads' custom kinds are audited too")
	fs.StringVar(&f.yunikornURL, "yunikorn", "", "the base URL of YuniKorn's REST API (http://yunikorn-service.yunikorn.svc:9080, or a kubectl port-forward): report the applications charged to another user than their Pods' user.info names")
	fs.StringVar(&f.auditLog, "audit-log", "", "instead of reading the cluster, list the requests monitor mode admitted that the webhook would have refused, and the stored ones the policy refuses when asked again, from this API server audit log (JSON lines; - for stdin)")
	fs.StringVar(&f.webhookName, "webhook", "", "with --audit-log: only this webhook's refusals (its name in the webhook configuration; default: any)")
	cmd.MarkFlagsMutuallyExclusive("settings-path", "settings-json")
	cmd.MarkFlagsMutuallyExclusive("audit-log", "kubeconfig")
	return cmd
}

func (a *app) runAudit(cmd *cobra.Command, f *auditFlags) error {
	if f.auditLog != "" {
		return a.runAuditLog(cmd.Context(), f)
	}
	if f.webhookName != "" {
		return errors.New("--webhook selects refusals in an audit log: give it with --audit-log")
	}
	reportAPI, reports := reportAPIs[f.output]
	switch {
	case f.output != "table" && f.output != "json" && f.output != "adopt" && !reports:
		return fmt.Errorf("invalid --output %q: want table, json, adopt, openreports or policyreport", f.output)
	case f.apply && !reports:
		return errors.New("--apply writes reports: give it with -o openreports or -o policyreport")
	case f.kubeconfig == "":
		return errors.New("nothing to audit: give --kubeconfig, or --audit-log")
	case f.pageSize <= 0:
		return fmt.Errorf("invalid --page-size %d: want a positive number", f.pageSize)
	case f.completing < 0:
		return fmt.Errorf("invalid --completing-timeout %s: want a duration of zero or more such as 30s", f.completing)
	}
	completing := f.completing
	if completing == 0 {
		completing = -1 // audit.Options: negative counts no finished Pod
	}
	if f.yunikornURL != "" {
		if _, err := audit.CheckRESTURL(f.yunikornURL); err != nil {
			return fmt.Errorf("invalid --yunikorn: %w", err)
		}
	}
	logger, err := a.logger()
	if err != nil {
		return err
	}
	kinds, sched, err := a.auditWorkloads(cmd.Context(), logger, f)
	if err != nil {
		return err
	}
	cfg, err := migrateKubeConfig(f.kubeconfig, f.kubeContext)
	if err != nil {
		return err
	}
	cfg.UserAgent = binaryName + " audit"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	// Before the audit, which can take long: --apply needs the CRDs.
	if f.apply {
		if err := audit.Served(cs.Discovery(), reportAPI); err != nil {
			return fmt.Errorf("audit --apply: %w", err)
		}
	}
	opts := audit.Options{
		Namespace: f.namespace, SchedulerName: f.schedulerName, PageSize: f.pageSize,
		UniqueAppIDs: f.uniqueAppIDs, CompletingTimeout: completing, ProgressEvery: f.progressEvery, Logger: logger,
		Workloads: kinds, Dynamic: dyn, Scheduling: sched,
	}
	if !f.quiet {
		opts.Progress = a.stderr
	}
	if f.queueCheck {
		part, from, err := audit.LoadQueues(ctx, cs, audit.QueueConfig{Namespace: f.ykNamespace, PolicyGroup: f.policyGroup, Partition: f.partition})
		if err != nil {
			return fmt.Errorf("%w (--queue-check=false audits without it)", err)
		}
		opts.Queues = part
		if !f.quiet {
			fmt.Fprintf(a.stderr, "audit: queue configuration: %s\n", from)
		}
	}
	began := time.Now()
	rep, err := audit.Run(ctx, cs, opts)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	if f.yunikornURL != "" {
		charged, err := audit.Charged(ctx, cs, audit.ChargedOptions{
			URL: f.yunikornURL, Namespace: f.namespace, PageSize: f.pageSize, Logger: logger,
		})
		if err != nil {
			return fmt.Errorf("audit --yunikorn: %w", err)
		}
		rep.Findings = append(rep.Findings, charged.Findings...)
		if !f.quiet {
			fmt.Fprintf(a.stderr, "audit: YuniKorn at %s: %d applications, %d of their Pods compared, %d charged to another user\n",
				f.yunikornURL, charged.Applications, charged.Pods, len(charged.Findings))
		}
	}
	if !f.quiet {
		fmt.Fprintf(a.stderr, "audit: done in %.1fs: %d findings\n", time.Since(began).Seconds(), len(rep.Findings))
		if rep.OwnersUnread > 0 {
			fmt.Fprintf(a.stderr, "audit: %d Pods not compared with their controller, which could not be read (see the warnings)\n", rep.OwnersUnread)
		}
		if rep.QueueUnchecked > 0 {
			fmt.Fprintf(a.stderr, "audit: %d Pods not placed: their user's groups are resolved on the scheduler's host, or their namespace could not be read\n", rep.QueueUnchecked)
		}
	}
	switch f.output {
	case "adopt":
		return rep.WriteAdoptions(a.stdout)
	case "json":
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	case "openreports", "policyreport":
		now := time.Now()
		reports := rep.PolicyReports(reportAPI, now)
		cluster := rep.ClusterPolicyReport(reportAPI, now)
		if f.apply {
			skipped, err := audit.Apply(ctx, dyn, reportAPI, f.namespace, reports)
			if err != nil {
				return err
			}
			for _, ns := range skipped {
				fmt.Fprintf(a.stderr, "audit: namespace %s is gone or being deleted: its %s was not written\n", ns, reportAPI.Kind)
			}
			fmt.Fprintf(a.stdout, "%d %ss written (%s)\n", len(reports)-len(skipped), reportAPI.Kind, audit.ReportName)
			// Only an audit of every namespace knows what is cluster-wide;
			// one of a namespace leaves the cluster-scoped report alone.
			if f.namespace != "" {
				return nil
			}
			if err := audit.ApplyCluster(ctx, dyn, reportAPI, cluster); err != nil {
				return err
			}
			if cluster != nil {
				fmt.Fprintf(a.stdout, "%s written (%s)\n", reportAPI.ClusterKind, audit.ReportName)
			} else {
				fmt.Fprintf(a.stdout, "no %s: nothing cluster-wide to report\n", reportAPI.ClusterKind)
			}
			return nil
		}
		if cluster != nil {
			reports = append(reports, cluster)
		}
		for _, r := range reports {
			out, err := yaml.Marshal(r.Object)
			if err != nil {
				return fmt.Errorf("write %s %s: %w", r.GetKind(), r.GetNamespace(), err)
			}
			if _, err := fmt.Fprintf(a.stdout, "---\n%s", out); err != nil {
				return err
			}
		}
		return nil
	}
	return rep.WriteTable(a.stdout)
}

// reportAPIs are the report outputs of -o.
var reportAPIs = map[string]audit.ReportAPI{audit.OpenReports.Name: audit.OpenReports, audit.WGPolicy.Name: audit.WGPolicy}

// auditWorkloads reads the custom kinds of the policy's settings, if any
// are given: the settings are read as run and serve read them, and
// checked by the embedded policy's validate_settings first, so that the
// audit judges with settings the policy accepts.
//
// It also returns the settings' scheduling setting (nil: off): with it,
// Pods and templates the policy would send to YuniKorn are audited too.
func (a *app) auditWorkloads(ctx context.Context, logger *slog.Logger, f *auditFlags) (*workloads.Set, *audit.Scheduling, error) {
	if f.settingsPath == "" && f.settingsJSON == "" {
		return nil, nil, nil
	}
	raw, err := readSettings(f.settingsPath, f.settingsJSON)
	if err != nil {
		return nil, nil, err
	}
	eng, err := a.loadModule(ctx, embeddedName, a.policy, engine.Options{
		Logger: logger, MaxInstances: 1, Timeout: engine.DefaultTimeout, MemoryLimitPages: defaultMemoryLimitMiB * pagesPerMiB,
	})
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = eng.Close(context.WithoutCancel(ctx)) }()
	if err := webhook.CheckSettings(ctx, logger, eng, raw); err != nil {
		return nil, nil, err
	}
	kinds, err := workloads.ParseSettings(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("read the settings' workloads: %w", err)
	}
	sched, err := audit.ParseScheduling(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("read the settings' scheduling: %w", err)
	}
	return kinds, sched, nil
}

// runAuditLog is audit --audit-log: the would-be refusals monitor mode let
// through, and the stored requests the embedded policy refuses when asked
// again with the settings given, from the API server's audit log.
func (a *app) runAuditLog(ctx context.Context, f *auditFlags) error {
	if f.output != "table" && f.output != "json" {
		return fmt.Errorf("invalid --output %q with --audit-log: want table or json", f.output)
	}
	logger, err := a.logger()
	if err != nil {
		return err
	}
	raw, err := readSettings(f.settingsPath, f.settingsJSON)
	if err != nil {
		return err
	}
	eng, err := a.loadModule(ctx, embeddedName, a.policy, engine.Options{
		Logger: logger, MaxInstances: 1, Timeout: engine.DefaultTimeout, MemoryLimitPages: defaultMemoryLimitMiB * pagesPerMiB,
	})
	if err != nil {
		return err
	}
	defer func() { _ = eng.Close(context.WithoutCancel(ctx)) }()
	if err := webhook.CheckSettings(ctx, logger, eng, raw); err != nil {
		return err
	}
	in := a.stdin
	if f.auditLog != "-" {
		file, err := os.Open(f.auditLog)
		if err != nil {
			return fmt.Errorf("audit --audit-log: %w", err)
		}
		defer file.Close()
		in = file
	}
	res, err := auditlog.Read(ctx, in, auditlog.Options{Namespace: f.namespace, Webhook: f.webhookName,
		Replay: &auditlog.Replay{Validate: eng.Validate, Settings: raw}})
	if err != nil {
		return fmt.Errorf("audit --audit-log %s: %w", f.auditLog, err)
	}
	if !f.quiet {
		monitored, persisted, replayed := 0, 0, 0
		for _, ad := range res.Admissions {
			switch {
			case ad.Source == auditlog.SourceReplay:
				replayed++
			case ad.Persisted():
				monitored++
				persisted++
			default:
				monitored++
			}
		}
		fmt.Fprintf(a.stderr, "audit: %d lines, %d would-be refusals admitted in monitor mode (%d persisted; the others were dry runs or failed later)\n",
			res.Lines, monitored, persisted)
		fmt.Fprintf(a.stderr, "audit: %d stored requests that supplied user.info asked again of the policy, %d refused (forged, or not provable from a log)\n",
			res.Replayed, replayed)
		if res.UpdatesUnjudged > 0 {
			fmt.Fprintf(a.stderr, "audit: %d updates that may change user.info not judged: the log does not hold the object as stored before and after (level RequestResponse)\n", res.UpdatesUnjudged)
		}
	}
	if f.output == "json" {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return res.WriteTable(a.stdout)
}
