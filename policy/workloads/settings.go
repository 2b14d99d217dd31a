package workloads

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/jsontext"
	"github.com/yunikorn-userinfo/userinfo/policy/jsonx"
)

// Kind is one kind a settings entry guards, with its annotation paths
// (RecordPath included).
type Kind struct {
	KindRef
	// Version and Resource are the version the paths were read from and
	// the kind's plural, for the manifests that route the kind to the
	// policy; a custom entry may leave them out ("").
	Version, Resource string
	Paths             []Path
	// Entry names the settings entry that guards the kind, for messages.
	Entry string
}

// Entry is one entry of settings.workloads: a preset or a custom kind,
// and the operators that turn it into other objects.
type Entry struct {
	Name  string // for messages
	Kinds []Kind
	// Operators may supply the identity that an owner of one of Owners
	// records (the owner proof, docs/BEHAVIOUR.md §3.4).
	Operators []*regexp.Regexp
	Owners    []KindRef
}

// Operators reads the operators of an entry (path is its settings path):
// the policy compiles them as it compiles its other pattern lists,
// reporting problems in the same list.
type Operators func(path string, v gjson.Result) []*regexp.Regexp

// Parse reads settings.workloads, v: a list whose entries are a preset's
// name, or an object with a preset or a custom kind and the operators of
// its kinds. Every problem found is appended to problems, naming its
// field. operators reads each entry's operators; nil leaves them unread
// (and unchecked).
func Parse(problems *[]string, v gjson.Result, operators Operators) []Entry {
	const key = "settings.workloads"
	if !v.IsArray() {
		*problems = append(*problems, key+": must be an array of presets ("+PresetNames()+") or objects, got "+jsonx.Describe(v))
		return nil
	}
	var out []Entry
	i := 0
	v.ForEach(func(_, e gjson.Result) bool {
		field := key + "[" + strconv.Itoa(i) + "]"
		i++
		if e.Type == gjson.String {
			if p := FindPreset(jsontext.Str(e)); p != nil {
				out = append(out, presetEntry(p))
			} else {
				*problems = append(*problems, field+": unknown preset "+jsontext.Quote(jsontext.Str(e))+" (presets: "+PresetNames()+")")
			}
			return true
		}
		if !jsonx.IsObject(e) {
			*problems = append(*problems, field+": must be a preset name or an object, got "+jsonx.Describe(e))
			return true
		}
		if w, ok := parseObject(problems, operators, field, e); ok {
			out = append(out, w)
		}
		return true
	})
	// A kind named twice would be guarded by whichever entry comes first.
	seen := map[KindRef]string{}
	for _, w := range out {
		for _, k := range w.Kinds {
			if prev, dup := seen[k.KindRef]; dup {
				*problems = append(*problems, key+": kind "+k.KindRef.String()+" is named by both "+prev+" and "+w.Name)
			}
			seen[k.KindRef] = w.Name
		}
	}
	return out
}

// presetEntry is the entry of a preset, without operators.
func presetEntry(p *Preset) Entry {
	w := Entry{Name: "preset " + p.Name}
	for _, pk := range p.Kinds {
		k := Kind{KindRef: KindRef{pk.Group, pk.Kind}, Version: pk.Version, Resource: pk.Resource, Entry: w.Name}
		for _, text := range pk.Paths {
			ap, _ := ParsePath(text)
			k.Paths = append(k.Paths, ap)
		}
		k.Paths = WithRecord(k.Paths)
		w.Kinds = append(w.Kinds, k)
		w.Owners = append(w.Owners, k.KindRef)
	}
	w.Owners = append(w.Owners, p.ExtraOwners...)
	return w
}

// parseObject reads {"preset": name, "operators": [...]} or
// {"group", "version", "kind", "resource", "paths", "operators", "owners"}.
func parseObject(problems *[]string, operators Operators, field string, e gjson.Result) (Entry, bool) {
	var w Entry
	var k Kind
	var paths []Path
	var hasPreset, hasKind, hasGroup, hasPaths bool
	var extraOwners []KindRef
	n := len(*problems)
	jsonx.EachMember(problems, field, e, func(name, path string, f gjson.Result) {
		switch name {
		case "preset":
			hasPreset = true
			if f.Type != gjson.String {
				*problems = append(*problems, path+": must be a string, got "+jsonx.Describe(f))
			} else if p := FindPreset(jsontext.Str(f)); p == nil {
				*problems = append(*problems, path+": unknown preset "+jsontext.Quote(jsontext.Str(f))+" (presets: "+PresetNames()+")")
			} else {
				// Keys come in any order: keep the operators already read.
				pe := presetEntry(p)
				w.Name, w.Kinds, w.Owners = pe.Name, pe.Kinds, pe.Owners
			}
		case "version", "resource":
			// For the manifests that route the kind to the policy (the
			// chart's webhook rules and RBAC); the rules need neither.
			if f.Type != gjson.String || jsontext.Str(f) == "" {
				*problems = append(*problems, path+": must be a non-empty string, got "+jsonx.Describe(f))
			} else if name == "version" {
				k.Version = jsontext.Str(f)
			} else {
				k.Resource = jsontext.Str(f)
			}
		case "group", "kind":
			if f.Type != gjson.String {
				*problems = append(*problems, path+": must be a string, got "+jsonx.Describe(f))
				return
			}
			if name == "group" {
				k.Group, hasGroup = jsontext.Str(f), true
			} else {
				k.Kind, hasKind = jsontext.Str(f), true
			}
		case "paths":
			hasPaths = true
			eachElement(problems, path, f, "an array of annotation paths", func(pf string, p gjson.Result) {
				if p.Type != gjson.String {
					*problems = append(*problems, pf+": must be a string, got "+jsonx.Describe(p))
					return
				}
				ap, problem := ParsePath(jsontext.Str(p))
				if problem != "" {
					*problems = append(*problems, pf+": "+jsontext.Quote(jsontext.Str(p))+" "+problem)
					return
				}
				paths = append(paths, ap)
			})
		case "operators":
			if operators != nil {
				w.Operators = operators(path, f)
			}
		case "owners":
			eachElement(problems, path, f, "an array of kinds (group/Kind, or Kind for the core group)", func(of string, o gjson.Result) {
				if o.Type != gjson.String || jsontext.Str(o) == "" || strings.Count(jsontext.Str(o), "/") > 1 {
					*problems = append(*problems, of+": must be a kind as group/Kind (Kind for the core group), got "+jsonx.Describe(o))
					return
				}
				g, kind, found := strings.Cut(jsontext.Str(o), "/")
				if !found {
					g, kind = "", g
				}
				extraOwners = append(extraOwners, KindRef{g, kind})
			})
		default:
			*problems = append(*problems, field+": unknown key "+jsontext.Quote(name)+" (known keys: preset, group, version, kind, resource, paths, operators, owners)")
		}
	})
	switch {
	case hasPreset && (hasKind || hasGroup || hasPaths):
		*problems = append(*problems, field+": names a preset and a kind: give one or the other")
	case !hasPreset && (!hasKind || !hasPaths):
		*problems = append(*problems, field+": must name a preset, or a kind with its paths")
	case !hasPreset:
		if k.Kind == "" || strings.ContainsAny(k.Kind, "/ .") || strings.ContainsAny(k.Group, "/ ") {
			*problems = append(*problems, field+": group "+jsontext.Quote(k.Group)+" and kind "+jsontext.Quote(k.Kind)+" must be an API group and a kind, like ray.io and RayCluster")
		} else if _, builtin := BuiltinMetadataPath(k.Group, k.Kind); builtin {
			*problems = append(*problems, field+": "+k.KindRef.String()+" is guarded already")
		} else if len(paths) == 0 && len(*problems) == n {
			*problems = append(*problems, field+".paths: must name at least one annotation path")
		}
		k.Paths = WithRecord(paths)
		w.Name = k.KindRef.String()
		k.Entry = w.Name
		w.Kinds = []Kind{k}
		w.Owners = []KindRef{k.KindRef}
	}
	w.Owners = append(w.Owners, extraOwners...)
	return w, len(*problems) == n
}

// eachElement calls f with each element of the settings array v at path
// (and the element's path), or reports that v must be what.
func eachElement(problems *[]string, path string, v gjson.Result, what string, f func(path string, e gjson.Result)) {
	if !v.IsArray() {
		*problems = append(*problems, path+": must be "+what+", got "+jsonx.Describe(v))
		return
	}
	i := 0
	v.ForEach(func(_, e gjson.Result) bool {
		f(path+"["+strconv.Itoa(i)+"]", e)
		i++
		return true
	})
}
