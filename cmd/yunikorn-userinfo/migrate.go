package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/host/settings"
	"github.com/yunikorn-userinfo/userinfo/internal/yunikorn/ykconfig"
)

// migrateFlags are the flags of `migrate`.
type migrateFlags struct {
	kubeconfig  string
	kubeContext string
	namespace   string
	output      string
	queueCheck  string
	appOwner    string
	explicit    bool
	scheduling  bool
	validate    bool
	timeout     time.Duration
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

The ConfigMaps come from FILEs (YAML or JSON: a ConfigMap, several YAML
documents, or a List; - reads stdin; a ConfigMap is recognised by its name,
one without a name is yunikorn-configs), or from the API server of
--kubeconfig, in --namespace.

Values are read as YuniKorn 1.9 reads them: booleans with Go's
strconv.ParseBool, pattern lists split at every comma, trimmed, empty pieces
skipped; a value YuniKorn cannot use leaves it at its default, and so does
the output. The settings are written typed (booleans, arrays of patterns) in
the policy's order of keys, and checked with the embedded policy's
validate_settings before they are printed. The admissionController.filtering
keys become the scheduling setting, written even when none is set (the
policy then replaces YuniKorn's admission controller); --scheduling=false
leaves it out.

On stderr, one line per key: KEY: STATUS: what became of it. STATUS is
mapped; differs (the policy behaves differently from YuniKorn there); invalid
(YuniKorn runs with its default); not mapped (the policy has nothing that does
it: the line says what to do instead); ignored (not the admission
controller's). See the README, "Migrating from YuniKorn's admission
controller".`,
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
	fs.StringVar(&f.appOwner, "application-ownership", "", "add applicationOwnership with this mode (enforce, warn, off) and admissionController.filtering.generateUniqueAppId")
	fs.BoolVar(&f.explicit, "explicit", false, "write every access control setting (and every key of scheduling), with YuniKorn's default where the ConfigMaps set none (YuniKorn's systemUsers default differs from the policy's)")
	fs.BoolVar(&f.scheduling, "scheduling", true, "write the scheduling setting from admissionController.filtering (the policy then sets schedulerName, application IDs and allow-preemption as YuniKorn's admission controller does); false: keep YuniKorn's admission controller for those")
	fs.BoolVar(&f.validate, "validate", true, "check the output with the embedded policy's validate_settings")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "with --kubeconfig: the deadline of reading the ConfigMaps")
	return cmd
}

func (a *app) runMigrate(cmd *cobra.Command, args []string, f *migrateFlags) error {
	ctx := cmd.Context()
	if f.output != "yaml" && f.output != "json" {
		return fmt.Errorf("invalid --output %q: want yaml or json", f.output)
	}
	var src ykconfig.Source
	var err error
	switch {
	case f.kubeconfig != "" && len(args) > 0:
		return errors.New("give FILEs or --kubeconfig, not both")
	case f.kubeconfig != "":
		src, err = readClusterConfigMaps(ctx, f)
	case len(args) > 0:
		src, err = a.readConfigMapFiles(args)
	default:
		return errors.New("nothing to read: give the ConfigMap FILE(s), or --kubeconfig")
	}
	if err != nil {
		return err
	}
	opts := ykconfig.Options{QueueCheck: f.queueCheck, ApplicationOwnership: f.appOwner, Explicit: f.explicit, NoScheduling: !f.scheduling}
	if f.kubeconfig != "" || cmd.Flags().Changed("namespace") {
		opts.Namespace = f.namespace
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
	fmt.Fprintf(a.stderr, "migrate: %s\n", src.Describe())
	if err := res.WriteReport(a.stderr); err != nil {
		return err
	}
	if f.validate {
		if err := a.checkMigrated(ctx, out); err != nil {
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
func readClusterConfigMaps(ctx context.Context, f *migrateFlags) (ykconfig.Source, error) {
	var src ykconfig.Source
	cfg, err := migrateKubeConfig(f.kubeconfig, f.kubeContext)
	if err != nil {
		return src, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return src, fmt.Errorf("API client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	src, missing, err := ykconfig.ReadCluster(ctx, cs, f.namespace)
	if err != nil {
		return src, err
	}
	if len(missing) == 2 {
		return src, fmt.Errorf("no ConfigMap %s or %s in namespace %q: is YuniKorn installed there? (--namespace)",
			ykconfig.ConfigMapName, ykconfig.DefaultsConfigMapName, f.namespace)
	}
	return src, nil
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
