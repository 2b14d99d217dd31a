package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/host/kubecap"
	"github.com/yunikorn-userinfo/userinfo/host/metadata"
)

// contextResources are the kinds a module's metadata declares it reads
// (contextAwareResources); none for a module without metadata, as under
// policy-server.
func contextResources(module []byte) ([]kubecap.Resource, error) {
	section, ok, err := metadata.ReadCustomSection(module, metadata.SectionName)
	if err != nil || !ok {
		return nil, err
	}
	md, err := metadata.Decode(section)
	if err != nil {
		return nil, fmt.Errorf("read the module's metadata: %w", err)
	}
	return kubecap.ResourcesOf(md.ContextAwareResources), nil
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
// directory or from an API server (kubeconfig: a file, or "in-cluster"),
// limited to what the module declares. Neither: nil, the engine's default
// (which refuses them). The cluster's watches end with ctx.
func capabilityHostCalls(ctx context.Context, logger *slog.Logger, module []byte, contextDir, kubeconfig string,
	observe func(op, outcome string, d time.Duration)) (engine.HostCallHandler, error) {
	if contextDir == "" && kubeconfig == "" {
		return nil, nil
	}
	resources, err := contextResources(module)
	if err != nil {
		return nil, err
	}
	var backend kubecap.Backend
	if contextDir != "" {
		r, err := kubecap.LoadReplay(contextDir)
		if err != nil {
			return nil, err
		}
		backend = r
	} else {
		cfg, err := kubeConfig(kubeconfig)
		if err != nil {
			return nil, err
		}
		c, err := kubecap.NewCluster(ctx, kubecap.ClusterOptions{Config: cfg, Resources: resources, Logger: logger.With("component", "kubernetes")})
		if err != nil {
			return nil, err
		}
		go func() { <-ctx.Done(); c.Close() }()
		backend = c
	}
	return kubecap.HostCalls(kubecap.Options{Backend: backend, Resources: resources, Logger: logger.With("component", "kubernetes"),
		Next: engine.KubewardenHostCalls(logger), Observe: observe})
}
