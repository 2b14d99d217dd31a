package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/host/settings"
	"github.com/yunikorn-userinfo/userinfo/internal/yunikorn/audit"
	"github.com/yunikorn-userinfo/userinfo/internal/yunikorn/ykconfig"
	"github.com/yunikorn-userinfo/userinfo/policy/appid"
)

// migrateFlags are the flags of `migrate`.
type migrateFlags struct {
	kubeconfig  string
	kubeContext string
	namespace   string
	output      string
	queueCheck  string
	appOwner    string
	uniqueIDs   bool
	explicit    bool
	scheduling  bool
	validate    bool
	timeout     time.Duration
	kw          kubewardenFlags
}

func newMigrateCommand(a *app) *cobra.Command {
	f := &migrateFlags{}
	cmd := &cobra.Command{
		Use:   "migrate [FILE [FILE]] | migrate --kubeconfig KUBECONFIG [-n NAMESPACE]",
		Short: "Convert the configuration of YuniKorn's admission controller into policy settings",
		Long: `Read the configuration of YuniKorn's own admission controller, the
admissionController.* keys of the yunikorn-configs ConfigMap (over
yunikorn-defaults, as YuniKorn merges them), and print the policy settings
that carry it over, for run -s and serve -s.

With --follow, the settings name followYuniKornConfig instead of copies of
the access control and filtering keys: the policy reads them live, mapped
as the report says. With --kubewarden, migrate prints the two
ClusterAdmissionPolicies instead of the settings: the mutating policy in
mode protect and its validating twin (validateOnly) in --twin-mode,
monitor by default, both with the migrated settings and the embedded
module's rules and OCI reference (docs/KUBEWARDEN.md, "Monitor mode under
Kubewarden").

The ConfigMaps come from FILEs (YAML or JSON: a ConfigMap, several YAML
documents, or a List; - reads stdin; a ConfigMap is recognised by its name,
one without a name is yunikorn-configs), or from the API server of
--kubeconfig, in --namespace.

Values are read as YuniKorn 1.9 reads them (tested against k8shim v1.9.0;
YuniKorn 1.10 reads the same keys the same way, read but not tested; the
report's first line says so): booleans with Go's strconv.ParseBool, pattern
lists split at every comma, trimmed, empty pieces skipped; a value YuniKorn
cannot use leaves it at its default, and so does the output. The settings are written typed (booleans, arrays of patterns) in
the policy's order of keys, and checked with the embedded policy's
validate_settings before they are printed. The admissionController.filtering
keys become the scheduling setting, written even when none is set (the
policy then replaces YuniKorn's admission controller); --scheduling=false
leaves it out.

On stderr, one line per key: KEY: STATUS: what became of it. STATUS is
mapped; differs (the policy behaves differently from YuniKorn there); invalid
(YuniKorn runs with its default); not mapped (the policy has nothing that does
it: the line says what to do instead); ignored (not the admission
controller's); warning (carried over as YuniKorn runs it, with a consequence
to act on: generateUniqueAppId false makes the Pods without an application
ID of a namespace one application, yunikorn-NAMESPACE-autogen, owned by the
user of its first Pod; with --kubeconfig the namespaces whose generated
application already holds Pods without user.info are named); handed over
(bypassAuth "true", how YuniKorn's admission controller stands aside after
the hand-over to this policy, or a YuniKorn that checks nothing: never
carried over, the output says bypassAuth: false, so migrate run after the
hand-over prints the settings that enforce; with --kubeconfig it also names
the registration of this policy YuniKorn's admission controller stands aside
for, or says that none is). See docs/MIGRATING.md.`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runMigrate(cmd, args, f)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", `read the ConfigMaps from the API server of this kubeconfig ("in-cluster": the Pod's service account)`)
	fs.StringVar(&f.kubeContext, "context", "", "with --kubeconfig: the kubeconfig context to use (default: its current context)")
	fs.StringVarP(&f.namespace, "namespace", "n", "yunikorn", "YuniKorn's namespace: where --kubeconfig reads the ConfigMaps, and queueCheck.namespace when FILEs name none")
	fs.StringVarP(&f.output, "output", "o", "yaml", "output format: yaml or json")
	fs.StringVar(&f.queueCheck, "queue-check", "", "add queueCheck with this mode (enforce, warn, off), YuniKorn's namespace and service.policyGroup")
	fs.BoolVar(&f.uniqueIDs, "unique-app-ids", false, "write generateUniqueAppIds: true (scheduling, applicationOwnership) whatever admissionController.filtering.generateUniqueAppId says: each Pod without an application ID gets one of its own, charged to its own user")
	fs.StringVar(&f.appOwner, "application-ownership", "", "add applicationOwnership with this mode (enforce, warn, off) and admissionController.filtering.generateUniqueAppId")
	fs.BoolVar(&f.explicit, "explicit", false, "write every access control setting (and every key of scheduling), with YuniKorn's default where the ConfigMaps set none (YuniKorn's systemUsers default differs from the policy's)")
	fs.BoolVar(&f.scheduling, "scheduling", true, "write the scheduling setting from admissionController.filtering (the policy then sets schedulerName, application IDs and allow-preemption as YuniKorn's admission controller does); false: keep YuniKorn's admission controller for those")
	fs.BoolVar(&f.validate, "validate", true, "check the output with the embedded policy's validate_settings")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "with --kubeconfig: the deadline of reading the ConfigMaps")
	addMigrateKubewardenFlags(fs, &f.kw)
	return cmd
}

func (a *app) runMigrate(cmd *cobra.Command, args []string, f *migrateFlags) error {
	ctx := cmd.Context()
	if f.output != "yaml" && f.output != "json" {
		return fmt.Errorf("invalid --output %q: want yaml or json", f.output)
	}
	if err := f.kw.check(f.output, cmd.Flags().Changed); err != nil {
		return err
	}
	var src ykconfig.Source
	var cs kubernetes.Interface
	var err error
	switch {
	case f.kubeconfig != "" && len(args) > 0:
		return errors.New("give FILEs or --kubeconfig, not both")
	case f.kubeconfig != "":
		src, cs, err = readClusterConfigMaps(ctx, f)
	case len(args) > 0:
		src, err = a.readConfigMapFiles(args)
	default:
		return errors.New("nothing to read: give the ConfigMap FILE(s), or --kubeconfig")
	}
	if err != nil {
		return err
	}
	opts := ykconfig.Options{QueueCheck: f.queueCheck, ApplicationOwnership: f.appOwner, Explicit: f.explicit, NoScheduling: !f.scheduling, UniqueAppIDs: f.uniqueIDs}
	if f.kubeconfig != "" || cmd.Flags().Changed("namespace") {
		opts.Namespace = f.namespace
	}
	if f.kw.follow {
		opts.Follow = followNamespace(src, f, cmd.Flags().Changed("namespace"))
	}
	res, err := ykconfig.Convert(src, opts)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	var out []byte
	if f.output == "json" {
		out, err = res.JSON()
	} else {
		out, err = res.YAML("Settings of the yunikorn-user-info policy, converted by `" + binaryName + " migrate` from\n" +
			"the admission controller configuration in " + src.Describe() + ".")
	}
	if err != nil {
		return fmt.Errorf("write the settings: %w", err)
	}
	fmt.Fprintf(a.stderr, "migrate: %s: %s\n", src.Describe(), ykconfig.CheckedAgainst)
	if err := res.WriteReport(a.stderr); err != nil {
		return err
	}
	if res.SharedAutogen && cs != nil {
		a.reportAutogen(ctx, cs, f.timeout)
	}
	if cs != nil && handedOver(res) {
		a.reportHandOver(ctx, cs, f.timeout)
	}
	if f.validate {
		if err := a.checkMigrated(ctx, out); err != nil {
			return err
		}
	}
	if f.kw.kubewarden {
		if out, err = a.writeKubewarden(res, src.Describe(), &f.kw); err != nil {
			return err
		}
	}
	_, err = a.stdout.Write(out)
	return err
}

// checkMigrated runs the printed settings, decoded as run -s and serve -s
// decode them, through the embedded policy's validate_settings.
func (a *app) checkMigrated(ctx context.Context, out []byte) error {
	logger, err := a.logger()
	if err != nil {
		return err
	}
	s, err := settings.Decode("migrated settings", out)
	if err != nil {
		return err
	}
	eng, err := a.loadModule(ctx, embeddedName, a.policy, engine.Options{Logger: logger, MaxInstances: 1})
	if err != nil {
		return err
	}
	defer eng.Close(context.WithoutCancel(ctx))
	v, err := eng.ValidateSettings(ctx, s)
	if err != nil {
		return fmt.Errorf("check the migrated settings: %w", err)
	}
	if !v.Valid {
		return fmt.Errorf("the policy refuses the migrated settings (a bug of migrate): %s", v.Message)
	}
	if v.Message != "" {
		fmt.Fprintf(a.stderr, "policy: %s\n", v.Message)
	}
	return nil
}

// readConfigMapFiles reads the ConfigMaps of the FILE arguments.
func (a *app) readConfigMapFiles(paths []string) (ykconfig.Source, error) {
	var src ykconfig.Source
	for _, p := range paths {
		data, err := a.readFileOrStdin(p)
		if err != nil {
			return src, fmt.Errorf("read ConfigMaps: %w", err)
		}
		cms, err := ykconfig.ReadConfigMaps(p, data)
		if err != nil {
			return src, err
		}
		for _, cm := range cms {
			if err := src.Add(p, cm); err != nil {
				return src, err
			}
		}
	}
	return src, nil
}

// readClusterConfigMaps reads yunikorn-defaults and yunikorn-configs from
// the API server; either may be absent, as for YuniKorn.
func readClusterConfigMaps(ctx context.Context, f *migrateFlags) (ykconfig.Source, kubernetes.Interface, error) {
	var src ykconfig.Source
	cfg, err := migrateKubeConfig(f.kubeconfig, f.kubeContext)
	if err != nil {
		return src, nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return src, nil, fmt.Errorf("API client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	src, missing, err := ykconfig.ReadCluster(ctx, cs, f.namespace)
	if err != nil {
		return src, nil, err
	}
	if len(missing) == 2 {
		return src, nil, fmt.Errorf("no ConfigMap %s or %s in namespace %q: is YuniKorn installed there? (--namespace)",
			ykconfig.ConfigMapName, ykconfig.DefaultsConfigMapName, f.namespace)
	}
	return src, cs, nil
}

// Bounds of the look for Pods in generated applications: it is a hint,
// not an audit (audit reads everything), so it stops after this many
// Pods.
const (
	autogenPageSize = 500
	autogenMaxPods  = 10000
)

// reportAutogen names, on stderr, the namespaces that already hold Pods
// YuniKorn schedules without user.info in their namespace's generated
// application (yunikorn-NAMESPACE-autogen): the application may already
// belong to "nobody" or to whoever created its first Pod. It reads at
// most autogenMaxPods Pods, and a failure (no list permission, say) is a
// line of the report, not an error: the settings are still printed.
func (a *app) reportAutogen(ctx context.Context, cs kubernetes.Interface, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	found, read, complete, err := autogenNamespaces(ctx, cs)
	if err != nil {
		fmt.Fprintf(a.stderr, "migrate: could not look for Pods in generated applications (audit finds them): %v\n", err)
		return
	}
	scope := fmt.Sprintf("all %d Pods read", read)
	if !complete {
		scope = fmt.Sprintf("the first %d Pods read; audit reads them all", read)
	}
	if len(found) == 0 {
		fmt.Fprintf(a.stderr, "migrate: no Pod without user.info in a generated application yunikorn-NAMESPACE-autogen (%s)\n", scope)
		return
	}
	parts := make([]string, 0, len(found))
	for _, ns := range slices.Sorted(maps.Keys(found)) {
		parts = append(parts, fmt.Sprintf("%s (%d)", ns, found[ns]))
	}
	fmt.Fprintf(a.stderr, "migrate: namespaces whose generated application yunikorn-NAMESPACE-autogen already holds Pods without "+
		"user.info (its owner may be \"nobody\" or the first Pod's user; recreate them once the IDs are unique or set): %s (%s)\n",
		strings.Join(parts, ", "), scope)
}

// autogenNamespaces counts, per namespace, the Pods of YuniKorn's scheduler
// without user.info whose application is their namespace's generated one.
func autogenNamespaces(ctx context.Context, cs kubernetes.Interface) (found map[string]int, read int, complete bool, err error) {
	found = map[string]int{}
	opts := metav1.ListOptions{Limit: autogenPageSize}
	for read < autogenMaxPods {
		l, err := cs.CoreV1().Pods("").List(ctx, opts)
		if err != nil {
			return nil, read, false, fmt.Errorf("list Pods: %w", err)
		}
		for i := range l.Items {
			p := &l.Items[i]
			read++
			if p.Spec.SchedulerName != "yunikorn" {
				continue
			}
			if _, ok := p.Annotations[audit.AnnotationKey]; ok {
				continue
			}
			_, generated := appid.Of(p.Namespace, func(k string) string { return p.Labels[k] },
				func(k string) string { return p.Annotations[k] }, false)
			if generated {
				found[p.Namespace]++
			}
		}
		if l.Continue == "" {
			return found, read, true, nil
		}
		opts.Continue = l.Continue
	}
	return found, read, false, nil
}

// migrateKubeConfig is the API server configuration of a kubeconfig file
// and context, or the in-cluster one.
func migrateKubeConfig(path, kubeContext string) (*rest.Config, error) {
	if path == "in-cluster" {
		if kubeContext != "" {
			return nil, errors.New("--context needs a kubeconfig file, not in-cluster")
		}
		return kubeConfig(path)
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path},
		&clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("read --kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}
