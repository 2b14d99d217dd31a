package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var updatePresets = flag.Bool("update", false, "rewrite the chart's generated workload presets")

// presetsFiles are where the chart and the host read the presets: the
// chart renders the webhook rules, the RBAC and the
// ClusterAdmissionPolicy's contextAwareResources of the kinds that
// settings.workloads enables from it, and the host's audit command
// (internal/yunikorn/workloads, which embeds its copy) reads the kinds' templates at
// their paths, so neither can drift from the policy's own table.
var presetsFiles = []string{
	filepath.Join("..", "charts", "yunikorn-userinfo", "files", "workload-presets.json"),
	filepath.Join("..", "internal", "yunikorn", "workloads", "presets.json"),
}

type presetResource struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Kind     string `json:"kind"`
	Resource string `json:"resource"`
	// Paths are the kind's annotation paths (kinds only, not owners).
	Paths []string `json:"paths,omitempty"`
}

// renderPresets is the generated file: per preset, the kinds the webhook
// must receive, and the kinds the owner proof reads.
func renderPresets(t *testing.T) []byte {
	type entry struct {
		Kinds  []presetResource `json:"kinds"`
		Owners []presetResource `json:"owners"`
	}
	out := map[string]entry{}
	for _, p := range presets {
		var e entry
		for _, k := range p.kinds {
			r := presetResource{Group: k.group, Version: k.version, Kind: k.kind, Resource: k.resource}
			e.Owners = append(e.Owners, r)
			r.Paths = k.paths
			e.Kinds = append(e.Kinds, r)
		}
		for _, o := range p.extraOwners {
			require.Equal(t, kindRef{"", "Pod"}, o, "the generator knows the resource of Pod only")
			e.Owners = append(e.Owners, presetResource{Group: "", Version: "v1", Kind: "Pod", Resource: "pods"})
		}
		out[p.name] = e
	}
	b, err := json.MarshalIndent(map[string]any{
		"comment": "Generated from the policy's presets (policy/workloads.go) by `go test ./policy -run TestPresetsFile -update`; do not edit.",
		"presets": out,
	}, "", "  ")
	require.NoError(t, err)
	return append(b, '\n')
}

func TestPresetsFile(t *testing.T) {
	want := renderPresets(t)
	for _, file := range presetsFiles {
		if *updatePresets {
			require.NoError(t, os.WriteFile(file, want, 0o644))
		}
		got, err := os.ReadFile(file)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got), "%s differs from the policy's presets: run go test ./policy -run TestPresetsFile -update", file)
	}
}

// Every preset's paths parse, and name kinds that are not built in.
func TestPresets_valid(t *testing.T) {
	for _, p := range presets {
		for _, k := range p.kinds {
			_, builtin := metadataPath(kindRef{k.group, k.kind})
			assert.False(t, builtin, k.kind)
			assert.NotEmpty(t, k.resource, k.kind)
			assert.NotEmpty(t, k.version, k.kind)
			for _, text := range k.paths {
				_, problem := parseAnnotationPath(text)
				assert.Empty(t, problem, "%s: %s", k.kind, text)
			}
		}
	}
}

// metadata.yml declares every kind the owner proof may read, so that
// kwctl and policy-server let the policy ask for it.
func TestPresets_inMetadata(t *testing.T) {
	md, err := os.ReadFile(filepath.Join("..", "metadata.yml"))
	require.NoError(t, err)
	for _, p := range presets {
		for _, k := range p.kinds {
			entry := "  - apiVersion: " + k.group + "/" + k.version + "\n    kind: " + k.kind + "\n"
			assert.Contains(t, string(md), entry, "metadata.yml contextAwareResources")
		}
	}
	assert.Contains(t, string(md), "  - apiVersion: v1\n    kind: Pod\n", "metadata.yml contextAwareResources")
}
