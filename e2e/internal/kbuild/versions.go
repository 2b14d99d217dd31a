package kbuild

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// KubeVersionEnv selects the Kubernetes minor version the suite's control
// plane runs (DefaultKubeVersion when unset).
const KubeVersionEnv = "E2E_KUBE_VERSION"

// DefaultKubeVersion is the version of the e2e module's own pins.
const DefaultKubeVersion = "1.37"

// kubeModules maps each Kubernetes minor version the suite runs on to the
// module, relative to the e2e module, whose pins Ensure builds: the newest
// is the e2e module itself, each other one a wrapper module of its own (its
// staging modules cannot share a module graph with the newest's): 1.33 the
// oldest the core scenarios run on, 1.35 the MutatingAdmissionPolicy beta
// the CEL scenarios run on (gate and API turned on), 1.36 the first with
// MutatingAdmissionPolicy GA and on by default, which the CEL scenarios
// also run on.
var kubeModules = map[string]string{
	DefaultKubeVersion: ".",
	"1.33":             "kube133",
	"1.35":             "kube135",
	"1.36":             "kube136",
}

// KubeVersions lists the versions KubeModuleDir accepts, oldest first.
func KubeVersions() []string {
	vs := make([]string, 0, len(kubeModules))
	for v := range kubeModules {
		vs = append(vs, v)
	}
	slices.SortFunc(vs, func(a, b string) int { return minorOf(a) - minorOf(b) })
	return vs
}

// KubeModuleDir returns the module whose pins build Kubernetes version (a
// KubeVersionEnv value: "1.33"; empty means DefaultKubeVersion), given the
// e2e module's directory.
func KubeModuleDir(e2eDir, version string) (string, error) {
	if version == "" {
		version = DefaultKubeVersion
	}
	rel, ok := kubeModules[strings.TrimPrefix(version, "v")]
	if !ok {
		return "", fmt.Errorf("%s=%q: not a Kubernetes version the suite builds (want one of %s)",
			KubeVersionEnv, version, strings.Join(KubeVersions(), ", "))
	}
	return filepath.Join(e2eDir, rel), nil
}

// minorOf is the minor number of "1.N", or -1.
func minorOf(v string) int {
	var major, minor int
	if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err != nil || major != 1 {
		return -1
	}
	return minor
}
