package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/policy/workloads"
)

var updatePresets = flag.Bool("update", false, "rewrite the chart's generated workload presets")

// presetsFiles are where the chart reads the presets: it renders the
// webhook rules, the RBAC and the ClusterAdmissionPolicy's
// contextAwareResources of the kinds that settings.workloads enables from
// it, so it cannot drift from the policy's own table (the host's tools
// import the table itself, policy/workloads).
var presetsFiles = []string{
	filepath.Join("..", "charts", "yunikorn-userinfo", "files", "workload-presets.json"),
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
	for _, p := range workloads.Presets {
		var e entry
		for _, k := range p.Kinds {
			r := presetResource{Group: k.Group, Version: k.Version, Kind: k.Kind, Resource: k.Resource}
			e.Owners = append(e.Owners, r)
			r.Paths = k.Paths
			e.Kinds = append(e.Kinds, r)
		}
		for _, o := range p.ExtraOwners {
			require.Equal(t, workloads.KindRef{Group: "", Kind: "Pod"}, o, "the generator knows the resource of Pod only")
			e.Owners = append(e.Owners, presetResource{Group: "", Version: "v1", Kind: "Pod", Resource: "pods"})
		}
		out[p.Name] = e
	}
	b, err := json.MarshalIndent(map[string]any{
		"comment": "Generated from the policy's presets (policy/workloads/presets.go) by `go test ./policy -run TestPresetsFile -update`; do not edit.",
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
	for _, p := range workloads.Presets {
		for _, k := range p.Kinds {
			_, builtin := metadataPath(kindRef{k.Group, k.Kind})
			assert.False(t, builtin, k.Kind)
			assert.NotEmpty(t, k.Resource, k.Kind)
			assert.NotEmpty(t, k.Version, k.Kind)
			for _, text := range k.Paths {
				_, problem := workloads.ParsePath(text)
				assert.Empty(t, problem, "%s: %s", k.Kind, text)
			}
		}
	}
}

// metadata.yml declares every kind the owner proof may read, so that
// kwctl and policy-server let the policy ask for it.
func TestPresets_inMetadata(t *testing.T) {
	md, err := os.ReadFile(filepath.Join("..", "metadata.yml"))
	require.NoError(t, err)
	for _, p := range workloads.Presets {
		for _, k := range p.Kinds {
			entry := "  - apiVersion: " + k.Group + "/" + k.Version + "\n    kind: " + k.Kind + "\n"
			assert.Contains(t, string(md), entry, "metadata.yml contextAwareResources")
		}
	}
	assert.Contains(t, string(md), "  - apiVersion: v1\n    kind: Pod\n", "metadata.yml contextAwareResources")
}
