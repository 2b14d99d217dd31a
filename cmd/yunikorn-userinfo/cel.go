package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/spf13/cobra"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/host/webhook"
	"github.com/yunikorn-userinfo/userinfo/internal/cel"
)

// celFlags are the flags of `cel`.
type celFlags struct {
	settingsPath string
	settingsJSON string
	kubeVersion  string
	name         string
	static       string
}

func newCELCommand(a *app) *cobra.Command {
	f := &celFlags{}
	cmd := &cobra.Command{
		Use:   "cel [-s SETTINGS | --settings-json JSON] [--kube-version 1.36]",
		Short: "Print the core rules as admission policies the API server evaluates itself",
		Long: `Print the policy's core rules as a MutatingAdmissionPolicy and a
ValidatingAdmissionPolicy (with their bindings) per shape of object: Pods,
workload templates, CronJobs, and Bindings. The API server evaluates them
itself, so the core holds with no webhook running: the submitter is recorded
on CREATE exactly as the policy records it, a supplied value is judged by the
allow-lists, and the recorded identity never changes afterwards.

The settings are those of run and serve, validated with the embedded policy's
validate_settings first. Settings whose rules read the cluster (trustRBAC,
queueCheck, configValidation, workloads, trustPodTokens,
applicationOwnership, scheduling) are refused: they need the webhook. The
refusal names the mode that takes them: hybrid (CEL and the webhook) for
queueCheck, configValidation, applicationOwnership and scheduling; the
webhook alone (standalone, or kubewarden) for trustRBAC, workloads,
trustPodTokens, adopters and followYuniKornConfig.

For 1.34 and 1.35, and for --static on 1.36, the feature gates the API
server needs are written on stderr.

--kube-version chooses the MutatingAdmissionPolicy API: v1 from 1.36,
v1beta1 on 1.34 and 1.35 (where it is off by default). With validateOnly
only the validating policies are printed.

--static DIR writes the policies as static manifests instead, which the API
server loads from disk at start (Kubernetes 1.37; 1.36 with the
ManifestBasedAdmissionControlConfig feature gate): they cannot be edited or
deleted through the API, by anyone.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runCEL(cmd.Context(), f)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&f.settingsPath, "settings-path", "s", "", "file with the policy settings, YAML or JSON (default {})")
	fs.StringVar(&f.settingsJSON, "settings-json", "", "policy settings as a JSON object (default {})")
	fs.StringVar(&f.kubeVersion, "kube-version", "1.36", "Kubernetes version of the API server (1.34 and later)")
	fs.StringVar(&f.name, "name", "yunikorn-userinfo", "prefix of the objects' names")
	fs.StringVar(&f.static, "static", "", "write the staticManifestsDir form into this directory (an absolute path, as the API server will read it): mutating/ and validating/ manifests, names ending in .static.k8s.io, and admission-configuration.yaml for --admission-control-config-file")
	cmd.MarkFlagsMutuallyExclusive("settings-path", "settings-json")
	return cmd
}

func (a *app) runCEL(ctx context.Context, f *celFlags) error {
	if _, err := cel.MAPVersion(f.kubeVersion); err != nil {
		return err
	}
	logger, err := a.logger()
	if err != nil {
		return err
	}
	raw, err := readSettings(f.settingsPath, f.settingsJSON)
	if err != nil {
		return err
	}
	// The module judges the settings first, so CEL never accepts what the
	// policy refuses.
	eng, err := a.loadModule(ctx, embeddedName, a.policy, engine.Options{Logger: logger, MaxInstances: 1})
	if err != nil {
		return err
	}
	defer eng.Close(context.WithoutCancel(ctx))
	if err := webhook.CheckSettings(ctx, logger, eng, raw); err != nil {
		return err
	}
	s, err := cel.ParseSettings(raw)
	if err != nil {
		return err
	}
	// What the chosen version needs, on stderr: the policies are written
	// either way, for an API server set up to load them.
	if needs := cel.Needs(f.kubeVersion, f.static != ""); needs != "" {
		logger.WarnContext(ctx, "the API server needs a feature gate for these policies", "needs", needs)
	}
	if f.static != "" {
		return writeStatic(s, f)
	}
	out, err := cel.Generate(s, cel.Options{KubeVersion: f.kubeVersion, Name: f.name})
	if err != nil {
		return err
	}
	if _, err := a.stdout.Write(out); err != nil {
		return fmt.Errorf("write policies: %w", err)
	}
	return nil
}

// writeStatic writes the staticManifestsDir form into f.static.
func writeStatic(s *cel.Settings, f *celFlags) error {
	if !filepath.IsAbs(f.static) {
		return fmt.Errorf("--static %q: must be an absolute path (the API server requires one)", f.static)
	}
	files, err := cel.StaticFiles(s, cel.Options{KubeVersion: f.kubeVersion, Name: f.name}, filepath.Clean(f.static))
	if err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		path := filepath.Join(f.static, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("write static manifests: %w", err)
		}
		if err := os.WriteFile(path, files[name], 0o644); err != nil {
			return fmt.Errorf("write static manifests: %w", err)
		}
	}
	return nil
}
