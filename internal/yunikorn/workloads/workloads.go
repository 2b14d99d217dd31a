// Package workloads reads the custom workload kinds of the policy's
// `workloads` setting (docs/BEHAVIOUR.md §3.3) for the host, and finds the
// pod templates of an object of such a kind at the kind's annotation paths.
//
// The host never imports the policy package. The presets come from
// presets.json, which `go test ./policy -run TestPresetsFile -update`
// writes from the policy's own table (policy/workloads.go), together with
// the chart's copy; that test fails when either differs from the table.
// Settings are meant to have been accepted by the policy's
// validate_settings first; Parse still refuses what it cannot use, naming
// the field, so that a caller that skipped the policy gets an error and
// not a wrong answer.
package workloads

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// AnnotationKey is the annotation YuniKorn reads the submitter from.
const AnnotationKey = "yunikorn.apache.org/user.info"

// RecordPath is where every kind of `workloads` records its submitter
// besides its pod templates (docs/BEHAVIOUR.md §3.3).
const RecordPath = "metadata.annotations"

//go:embed presets.json
var presetsJSON []byte

// KindRef names a kind by API group ("" for the core group) and kind.
type KindRef struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
}

// String is the kind as messages write it: Kind.group, or Kind.
func (k KindRef) String() string {
	if k.Group == "" {
		return k.Kind
	}
	return k.Kind + "." + k.Group
}

// Kind is one guarded custom kind.
type Kind struct {
	KindRef
	// Version and Resource are the version the paths were read from and
	// the kind's plural; a custom entry may leave them out ("").
	Version  string `json:"version,omitempty"`
	Resource string `json:"resource,omitempty"`
	// Paths are the kind's annotation paths, the record path
	// (metadata.annotations) included.
	Paths []Path `json:"-"`
	// Entry names the settings entry that guards the kind, for messages.
	Entry string `json:"-"`
}

// Set is what settings.workloads guards: its kinds, and the kinds whose
// objects may be the controller owner of what their operators create
// (the kinds themselves plus the entries' extra owners, such as Pod for
// LeaderWorkerSet).
type Set struct {
	Kinds  []Kind
	Owners []KindRef
}

// Kind returns the guarded kind k, or nil.
func (s *Set) Kind(k KindRef) *Kind {
	if s == nil {
		return nil
	}
	for i := range s.Kinds {
		if s.Kinds[i].KindRef == k {
			return &s.Kinds[i]
		}
	}
	return nil
}

// IsOwner reports whether objects of kind k may own what an operator of
// the settings creates.
func (s *Set) IsOwner(k KindRef) bool {
	if s == nil {
		return false
	}
	for _, o := range s.Owners {
		if o == k {
			return true
		}
	}
	return false
}

type presetFile struct {
	Presets map[string]struct {
		Kinds []struct {
			Group    string   `json:"group"`
			Version  string   `json:"version"`
			Kind     string   `json:"kind"`
			Resource string   `json:"resource"`
			Paths    []string `json:"paths"`
		} `json:"kinds"`
		Owners []struct {
			Group string `json:"group"`
			Kind  string `json:"kind"`
		} `json:"owners"`
	} `json:"presets"`
}

var presets = func() presetFile {
	var f presetFile
	if err := json.Unmarshal(presetsJSON, &f); err != nil {
		panic("internal/yunikorn/workloads: presets.json: " + err.Error())
	}
	return f
}()

// PresetNames lists the presets.
func PresetNames() []string {
	names := make([]string, 0, len(presets.Presets))
	for n := range presets.Presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// preset resolves a preset by name.
func preset(name string) (kinds []Kind, owners []KindRef, ok bool) {
	p, ok := presets.Presets[name]
	if !ok {
		return nil, nil, false
	}
	for _, pk := range p.Kinds {
		k := Kind{KindRef: KindRef{pk.Group, pk.Kind}, Version: pk.Version, Resource: pk.Resource, Entry: "preset " + name}
		for _, text := range pk.Paths {
			ap, problem := ParsePath(text)
			if problem != "" {
				panic("internal/yunikorn/workloads: presets.json: " + pk.Kind + ": " + problem)
			}
			k.Paths = append(k.Paths, ap)
		}
		k.Paths = withRecord(k.Paths)
		kinds = append(kinds, k)
	}
	for _, o := range p.Owners {
		owners = append(owners, KindRef{o.Group, o.Kind})
	}
	return kinds, owners, true
}

// Parse reads settings.workloads from a settings object; a Set without
// kinds when the settings have none.
func Parse(settings json.RawMessage) (*Set, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(settings, &top); err != nil {
		return nil, fmt.Errorf("settings: must be a JSON object: %w", err)
	}
	raw, ok := top["workloads"]
	s := &Set{}
	if !ok {
		return s, nil
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil || entries == nil {
		return nil, fmt.Errorf("settings.workloads: must be an array of presets (%s) or objects", strings.Join(PresetNames(), ", "))
	}
	seen := map[KindRef]string{}
	for i, e := range entries {
		field := "settings.workloads[" + strconv.Itoa(i) + "]"
		kinds, owners, err := parseEntry(field, e)
		if err != nil {
			return nil, err
		}
		for _, k := range kinds {
			if prev, dup := seen[k.KindRef]; dup {
				return nil, fmt.Errorf("settings.workloads: kind %s is named by both %s and %s", k.KindRef, prev, k.Entry)
			}
			seen[k.KindRef] = k.Entry
		}
		s.Kinds = append(s.Kinds, kinds...)
		for _, o := range owners {
			if !s.IsOwner(o) {
				s.Owners = append(s.Owners, o)
			}
		}
	}
	return s, nil
}

func parseEntry(field string, e json.RawMessage) ([]Kind, []KindRef, error) {
	var name string
	if err := json.Unmarshal(e, &name); err == nil {
		kinds, owners, ok := preset(name)
		if !ok {
			return nil, nil, fmt.Errorf("%s: unknown preset %q (presets: %s)", field, name, strings.Join(PresetNames(), ", "))
		}
		return kinds, owners, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(e, &obj); err != nil {
		return nil, nil, fmt.Errorf("%s: must be a preset name or an object", field)
	}
	str := func(key string) (string, bool, error) {
		v, ok := obj[key]
		if !ok {
			return "", false, nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", true, fmt.Errorf("%s.%s: must be a string", field, key)
		}
		return s, true, nil
	}
	var owners []KindRef
	if v, ok := obj["owners"]; ok {
		var list []string
		if err := json.Unmarshal(v, &list); err != nil {
			return nil, nil, fmt.Errorf("%s.owners: must be an array of kinds (group/Kind, or Kind for the core group)", field)
		}
		for j, o := range list {
			g, k, found := strings.Cut(o, "/")
			if !found {
				g, k = "", g
			}
			if k == "" || strings.Contains(k, "/") {
				return nil, nil, fmt.Errorf("%s.owners[%d]: must be a kind as group/Kind (Kind for the core group), got %q", field, j, o)
			}
			owners = append(owners, KindRef{g, k})
		}
	}
	for key := range obj {
		switch key {
		case "preset", "group", "version", "kind", "resource", "paths", "operators", "owners":
		default:
			return nil, nil, fmt.Errorf("%s: unknown key %q (known keys: preset, group, version, kind, resource, paths, operators, owners)", field, key)
		}
	}
	pname, hasPreset, err := str("preset")
	if err != nil {
		return nil, nil, err
	}
	_, hasKind := obj["kind"]
	_, hasGroup := obj["group"]
	_, hasPaths := obj["paths"]
	if hasPreset {
		if hasKind || hasGroup || hasPaths {
			return nil, nil, fmt.Errorf("%s: names a preset and a kind: give one or the other", field)
		}
		kinds, pOwners, ok := preset(pname)
		if !ok {
			return nil, nil, fmt.Errorf("%s.preset: unknown preset %q (presets: %s)", field, pname, strings.Join(PresetNames(), ", "))
		}
		return kinds, append(pOwners, owners...), nil
	}
	if !hasKind || !hasPaths {
		return nil, nil, fmt.Errorf("%s: must name a preset, or a kind with its paths", field)
	}
	var k Kind
	for _, f := range []struct {
		key string
		dst *string
	}{{"group", &k.Group}, {"kind", &k.Kind}, {"version", &k.Version}, {"resource", &k.Resource}} {
		v, present, err := str(f.key)
		if err != nil {
			return nil, nil, err
		}
		if present && v == "" && (f.key == "version" || f.key == "resource") {
			return nil, nil, fmt.Errorf("%s.%s: must be a non-empty string", field, f.key)
		}
		*f.dst = v
	}
	if k.Kind == "" || strings.ContainsAny(k.Kind, "/ .") || strings.ContainsAny(k.Group, "/ ") {
		return nil, nil, fmt.Errorf("%s: group %q and kind %q must be an API group and a kind, like ray.io and RayCluster", field, k.Group, k.Kind)
	}
	var texts []string
	if err := json.Unmarshal(obj["paths"], &texts); err != nil {
		return nil, nil, fmt.Errorf("%s.paths: must be an array of annotation paths", field)
	}
	if len(texts) == 0 {
		return nil, nil, fmt.Errorf("%s.paths: must name at least one annotation path", field)
	}
	for j, text := range texts {
		ap, problem := ParsePath(text)
		if problem != "" {
			return nil, nil, fmt.Errorf("%s.paths[%d]: %q %s", field, j, text, problem)
		}
		k.Paths = append(k.Paths, ap)
	}
	k.Paths = withRecord(k.Paths)
	k.Entry = k.KindRef.String()
	return []Kind{k}, append([]KindRef{k.KindRef}, owners...), nil
}

// withRecord adds RecordPath to paths, unless they name it.
func withRecord(paths []Path) []Path {
	for _, p := range paths {
		if p.Text == RecordPath {
			return paths
		}
	}
	ap, _ := ParsePath(RecordPath)
	return append(paths, ap)
}
