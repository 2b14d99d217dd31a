package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/host/kubecap"
	"github.com/yunikorn-userinfo/userinfo/host/metadata"
	"github.com/yunikorn-userinfo/userinfo/internal/yunikorn/appindex"
	"github.com/yunikorn-userinfo/userinfo/policy/appid"
	"github.com/yunikorn-userinfo/userinfo/policy/appowners"
)

// syncGCPercent is the collector's GOGC while serve waits for the first
// lists of --sync-before-ready.
const syncGCPercent = 25

// contextResources are the kinds a module's metadata declares it reads
// (contextAwareResources), and how it lets this host cache them (the
// kubecap.CacheAnnotation); none for a module without metadata, as under
// policy-server.
func contextResources(module []byte) ([]kubecap.Resource, []kubecap.CacheSpec, error) {
	section, ok, err := metadata.ReadCustomSection(module, metadata.SectionName)
	if err != nil || !ok {
		return nil, nil, err
	}
	md, err := metadata.Decode(section)
	if err != nil {
		return nil, nil, fmt.Errorf("read the module's metadata: %w", err)
	}
	var specs []kubecap.CacheSpec
	if v, ok := md.Annotations[kubecap.CacheAnnotation]; ok {
		if specs, err = kubecap.ParseCacheSpecs([]byte(v)); err != nil {
			return nil, nil, fmt.Errorf("the module's metadata annotation %s: %w", kubecap.CacheAnnotation, err)
		}
	}
	return kubecap.ResourcesOf(md.ContextAwareResources), specs, nil
}

// capabilityOptions say where the Kubernetes capabilities are answered
// from: a replay directory, or an API server (kubeconfig: a file, or
// "in-cluster").
type capabilityOptions struct {
	contextDir, kubeconfig string
	// cache, a JSON list of kubecap.CacheSpec, replaces the module's
	// declaration kind by kind.
	cache string
	// syncBeforeReady are the kinds ("apiVersion/Kind", as v1/Pod or
	// ray.io/v1/RayJob) whose watch over all namespaces must have synced
	// before serve reports ready.
	syncBeforeReady []string
	observe         func(op, outcome string, d time.Duration)
	// settings are the policy's settings at start: with
	// applicationOwnership on, the watch cache of Pods keeps the index of
	// application owners for them (appindex).
	settings json.RawMessage
}

// keepUserLabel adds the settings' userLabelKey to the Pod labels the
// cache keeps, where the declaration keeps only some: the policy reads a
// Pod's user from it when the Pod has no user.info.
func keepUserLabel(specs []kubecap.CacheSpec, settings json.RawMessage) []kubecap.CacheSpec {
	o, _, err := appowners.FromSettings(string(settings))
	if err != nil {
		return specs
	}
	out := slices.Clone(specs)
	for i, s := range out {
		kept, ok := s.Keys["metadata.labels"]
		if s.APIVersion != "v1" || s.Kind != "Pod" || !ok || slices.Contains(kept, o.UserLabelKey) {
			continue
		}
		keys := maps.Clone(s.Keys)
		keys["metadata.labels"] = append(slices.Clone(kept), o.UserLabelKey)
		out[i].Keys = keys
	}
	return out
}

// podResource is the kind whose cache keeps application IDs.
var podResource = kubecap.Resource{APIVersion: "v1", Kind: "Pod"}

// boundAppIDs bounds, in the cache of Pods, the labels and the annotation
// that carry an application ID to appid.MaxIDBytes: a longer value is kept
// as kubecap.TooLongValue, which the policy reads as too long
// (appid.TooLong), so a Pod costs every replica a bounded size whatever
// it carries. Whatever declares the Pod cache (the module, --cache), the
// bound is added, as is a declaration for Pods if there is none.
func boundAppIDs(specs []kubecap.CacheSpec, resources []kubecap.Resource) []kubecap.CacheSpec {
	out := slices.Clone(specs)
	i := slices.IndexFunc(out, func(s kubecap.CacheSpec) bool {
		return s.APIVersion == podResource.APIVersion && s.Kind == podResource.Kind
	})
	if i < 0 {
		if !slices.Contains(resources, podResource) {
			return out
		}
		out = append(out, kubecap.CacheSpec{APIVersion: podResource.APIVersion, Kind: podResource.Kind})
		i = len(out) - 1
	}
	bounds := map[string]map[string]int{}
	for path, m := range out[i].MaxValueBytes {
		bounds[path] = maps.Clone(m)
	}
	bound := func(path, key string) {
		if bounds[path] == nil {
			bounds[path] = map[string]int{}
		}
		if n, ok := bounds[path][key]; !ok || n > appid.MaxIDBytes {
			bounds[path][key] = appid.MaxIDBytes
		}
	}
	for _, key := range []string{appid.LabelCanonical, appid.Label, appid.LabelSpark} {
		bound("metadata.labels", key)
	}
	bound("metadata.annotations", appid.Annotation)
	out[i].MaxValueBytes = bounds
	return out
}

// appIndexes are the indexes the policy's settings ask of the host: the
// index of application owners, with applicationOwnership on and Pods
// among the module's resources. Settings this cannot read are left to the
// policy's validate_settings to refuse.
func appIndexes(logger *slog.Logger, settings json.RawMessage, resources []kubecap.Resource) []kubecap.IndexSpec {
	o, on, err := appowners.FromSettings(string(settings))
	if err != nil {
		logger.Warn("no index of application owners", "error", err)
		return nil
	}
	spec := appindex.Spec(o)
	if !on || !slices.Contains(resources, spec.Resource) {
		return nil
	}
	logger.Info("keeping an index of application owners", "index", spec.Name)
	return []kubecap.IndexSpec{spec}
}

// parseResourceList reads "v1/Pod", "ray.io/v1/RayJob", ...: the kind is
// after the last slash.
func parseResourceList(flag string, list []string) ([]kubecap.Resource, error) {
	var out []kubecap.Resource
	for _, s := range list {
		i := strings.LastIndex(s, "/")
		if i <= 0 || i == len(s)-1 {
			return nil, fmt.Errorf("invalid %s %q: want apiVersion/Kind, as v1/Pod or ray.io/v1/RayJob", flag, s)
		}
		out = append(out, kubecap.Resource{APIVersion: s[:i], Kind: s[i+1:]})
	}
	return out, nil
}

// serviceAccountToken is where Kubernetes mounts a Pod's service account
// token.
const serviceAccountToken = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// inClusterCredentials reports whether serve runs in a Pod that has API
// credentials: the token is mounted only where the deployment asks for it
// (automountServiceAccountToken), which the chart does only for the
// settings that need the API server.
func inClusterCredentials() bool {
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		return false
	}
	_, err := os.Stat(serviceAccountToken)
	return err == nil
}

// kubeConfig is the API server configuration of --kubeconfig, or the
// in-cluster one when path is "in-cluster".
func kubeConfig(path string) (*rest.Config, error) {
	if path == "in-cluster" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster API server configuration: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("read --kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// capabilityHostCalls answers the Kubernetes capabilities from a replay
// directory or from an API server, limited to what the module declares.
// Neither: nil, the engine's default (which refuses them). The cluster's
// watches end with ctx. warm, never nil, waits for the watches of
// o.syncBeforeReady.
func capabilityHostCalls(ctx context.Context, logger *slog.Logger, module []byte, o capabilityOptions) (
	h engine.HostCallHandler, warm func(context.Context) error, err error) {
	warm = func(context.Context) error { return nil }
	if o.contextDir == "" && o.kubeconfig == "" {
		if len(o.syncBeforeReady) > 0 {
			return nil, nil, errors.New("--sync-before-ready needs an API server (--kubeconfig, or serve in a Pod with a service account token)")
		}
		return nil, warm, nil
	}
	resources, specs, err := contextResources(module)
	if err != nil {
		return nil, nil, err
	}
	if o.cache != "" {
		over, err := kubecap.ParseCacheSpecs([]byte(o.cache))
		if err != nil {
			return nil, nil, fmt.Errorf("invalid --cache: %w", err)
		}
		specs = kubecap.MergeCacheSpecs(specs, over)
	}
	specs = boundAppIDs(keepUserLabel(specs, o.settings), resources)
	sync, err := parseResourceList("--sync-before-ready", o.syncBeforeReady)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range sync {
		if !slices.Contains(resources, r) {
			return nil, nil, fmt.Errorf("invalid --sync-before-ready %s: the module does not declare it in contextAwareResources", r)
		}
	}
	indexes := appIndexes(logger, o.settings, resources)
	var backend kubecap.Backend
	if o.contextDir != "" {
		r, err := kubecap.LoadReplay(o.contextDir)
		if err != nil {
			return nil, nil, err
		}
		backend = r.WithIndexes(nil, indexes...)
	} else {
		cfg, err := kubeConfig(o.kubeconfig)
		if err != nil {
			return nil, nil, err
		}
		c, err := kubecap.NewCluster(ctx, kubecap.ClusterOptions{Config: cfg, Resources: resources, Cache: specs, Indexes: indexes,
			Logger: logger.With("component", "kubernetes")})
		if err != nil {
			return nil, nil, err
		}
		go func() { <-ctx.Done(); c.Close() }()
		c.StartIndexes()
		backend = c
		if len(sync) > 0 {
			warm = func(ctx context.Context) error {
				// The first list of a kind is held whole (pruned) until
				// it is in the cache: collect its garbage sooner than
				// at twice the live heap, and only then.
				prev := debug.SetGCPercent(syncGCPercent)
				if prev >= 0 && prev < syncGCPercent {
					debug.SetGCPercent(prev) // the operator's is lower
				}
				defer debug.SetGCPercent(prev)
				if err := c.Warm(ctx, sync); err != nil {
					return err
				}
				// The first lists decoded every object whole: give the
				// heap they grew back now rather than in the scavenger's
				// own time (its pages would count until then).
				debug.FreeOSMemory()
				return nil
			}
		}
	}
	h, err = kubecap.HostCalls(kubecap.Options{Backend: backend, Resources: resources, Logger: logger.With("component", "kubernetes"),
		Next: engine.KubewardenHostCalls(logger), Observe: o.observe})
	return h, warm, err
}
