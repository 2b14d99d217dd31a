package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/host/audit"
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
	pageSize      int64
	progressEvery int
	quiet         bool
	queueCheck    bool
	ykNamespace   string
	policyGroup   string
	partition     string
	timeout       time.Duration
}

func newAuditCommand(a *app) *cobra.Command {
	f := &auditFlags{}
	cmd := &cobra.Command{
		Use:   "audit --kubeconfig KUBECONFIG [-n NAMESPACE] [-o table|json|policyreport [--apply]]",
		Short: "Find the Pods and workloads of a cluster whose user.info YuniKorn cannot trust",
		Long: `Read every Pod and workload template of the cluster (or of --namespace) that
YuniKorn schedules (spec.schedulerName --scheduler-name) and report:

  user-info-missing         no yunikorn.apache.org/user.info annotation
  user-info-invalid         a value the policy would refuse (not a JSON object
                            with a non-empty string "user", keys not exactly
                            "user" and "groups", duplicated, ...)
  user-info-owner-mismatch  a Pod whose user.info differs from the template of
                            its controller (ReplicaSet, StatefulSet, DaemonSet,
                            Job, ReplicationController)
  application-id-shared     Pods of one YuniKorn application naming different
                            users (the application IDs as the shim reads them)
  queue-not-allowed         a Pod whose user may submit to no queue YuniKorn
                            would place its application in, under the current
                            queues.yaml (--queue-check, from the ConfigMaps of
                            --yunikorn-namespace)

Workloads made before the policy was installed, while it was down, in
monitor mode, or in namespaces it does not cover are what this finds.
Objects are listed --page-size at a time and only per-application
aggregates are kept, so memory grows with the findings and the number of
applications, not with the number of Pods. Progress goes to stderr.

Output: a table, JSON (-o json), or wgpolicyk8s.io/v1alpha2 PolicyReports,
one per namespace (-o policyreport), printed as YAML or, with --apply,
written to the cluster (created or replaced; the report an earlier audit
left in a namespace with nothing audited any more is deleted). The exit
code is 0 whatever was found; 1 on errors. See the README, "Auditing what
already runs".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runAudit(cmd, f)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", `the cluster to audit ("in-cluster": the Pod's service account); required`)
	fs.StringVar(&f.kubeContext, "context", "", "the kubeconfig context to use (default: its current context)")
	fs.StringVarP(&f.namespace, "namespace", "n", "", "audit this namespace only (default: all namespaces)")
	fs.StringVarP(&f.output, "output", "o", "table", "output format: table, json or policyreport")
	fs.BoolVar(&f.apply, "apply", false, "with -o policyreport: write the PolicyReports to the cluster instead of printing them")
	fs.StringVar(&f.schedulerName, "scheduler-name", "yunikorn", "the scheduler name of YuniKorn: Pods and templates of other schedulers are skipped")
	fs.BoolVar(&f.uniqueAppIDs, "unique-app-ids", false, "YuniKorn runs with admissionController.filtering.generateUniqueAppId: Pods without an application ID do not share their namespace's")
	fs.Int64Var(&f.pageSize, "page-size", 500, "objects per list request")
	fs.IntVar(&f.progressEvery, "progress-every", 5000, "a progress line on stderr every this many objects of a kind")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress lines")
	fs.BoolVar(&f.queueCheck, "queue-check", true, "place every Pod as YuniKorn would under its current queue configuration, and report users who may submit to no queue they would get")
	fs.StringVar(&f.ykNamespace, "yunikorn-namespace", "yunikorn", "with --queue-check: the namespace of YuniKorn's yunikorn-configs and yunikorn-defaults ConfigMaps")
	fs.StringVar(&f.policyGroup, "policy-group", "queues", "with --queue-check: YuniKorn's service.policyGroup (the ConfigMap key POLICY-GROUP.yaml)")
	fs.StringVar(&f.partition, "partition", "default", "with --queue-check: the partition Pods are placed in")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Minute, "the deadline of the whole audit")
	return cmd
}

func (a *app) runAudit(cmd *cobra.Command, f *auditFlags) error {
	switch {
	case f.output != "table" && f.output != "json" && f.output != "policyreport":
		return fmt.Errorf("invalid --output %q: want table, json or policyreport", f.output)
	case f.apply && f.output != "policyreport":
		return errors.New("--apply writes PolicyReports: give it with -o policyreport")
	case f.kubeconfig == "":
		return errors.New("nothing to audit: give --kubeconfig")
	case f.pageSize <= 0:
		return fmt.Errorf("invalid --page-size %d: want a positive number", f.pageSize)
	}
	logger, err := a.logger()
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
	opts := audit.Options{
		Namespace: f.namespace, SchedulerName: f.schedulerName, PageSize: f.pageSize,
		UniqueAppIDs: f.uniqueAppIDs, ProgressEvery: f.progressEvery, Logger: logger,
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
	case "json":
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	case "policyreport":
		reports := rep.PolicyReports(time.Now())
		if f.apply {
			dyn, err := dynamic.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("API client: %w", err)
			}
			if err := audit.Apply(ctx, dyn, f.namespace, reports); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%d PolicyReports written (%s)\n", len(reports), audit.ReportName)
			return nil
		}
		for _, r := range reports {
			out, err := yaml.Marshal(r.Object)
			if err != nil {
				return fmt.Errorf("write PolicyReport %s: %w", r.GetNamespace(), err)
			}
			if _, err := fmt.Fprintf(a.stdout, "---\n%s", out); err != nil {
				return err
			}
		}
		return nil
	}
	return rep.WriteTable(a.stdout)
}
