package queues

import (
	"fmt"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// The configuration as yunikorn-core decodes it (configs.SchedulerConfig
// and its members, with yaml.v3 and KnownFields): what placement, ACLs
// and core's validation need is kept, every key the scheduler knows is
// accepted and every other key is an error, as it is there.

type schedulerConfig struct {
	partitions []partitionConfig
}

type partitionConfig struct {
	name     string
	queues   []queueConfig
	hasQueue bool // queues was given and not null
	rules    []ruleConfig
	resolver string // usergroupresolver.type
	limits   []limitConfig
	nodeSort string
	weights  map[string]float64 // nodesortpolicy.resourceweights
}

type queueConfig struct {
	name      string
	parent    bool
	submitACL string
	adminACL  string
	queues    []queueConfig
	// guaranteed and max are resources.guaranteed and resources.max; nil
	// when not given (an empty map when given empty, as yaml.v3 has it).
	guaranteed, max map[string]string
	maxApps         uint64
	limits          []limitConfig
}

// limitConfig is configs.Limit; nil and empty lists and maps differ, as
// they do for the reflect.DeepEqual core compares partition limits with.
type limitConfig struct {
	limit         string
	users, groups []string
	maxResources  map[string]string
	maxApps       uint64
}

type ruleConfig struct {
	name   string
	create bool
	filter filterConfig
	parent *ruleConfig
	value  string
}

type filterConfig struct {
	kind   string // the filter's type
	users  []string
	groups []string
}

// typeError is yaml.v3's TypeError: every problem the decoder met, in the
// order it met them, worded as yaml.v3 words them.
type typeError struct{ errors []string }

func (e *typeError) Error() string {
	return "yaml: unmarshal errors:\n  " + strings.Join(e.errors, "\n  ")
}

// fatalError is an error that stops yaml.v3's decoder at once.
type fatalError struct{ msg string }

func (e *fatalError) Error() string { return "yaml: " + e.msg }

func fatal(format string, args ...any) error { return &fatalError{msg: fmt.Sprintf(format, args...)} }

// decodeConfig reads queues.yaml as core's ParseAndValidateConfig decodes
// it: the first document only, strict about keys and types; an empty text
// is an empty configuration. Its errors are yaml.v3's, word for word.
//
// The text goes to yaml.v3 only once checkSyntax has found that yaml.v3
// parses it: yaml.v3 reports a syntax error by a panic, which traps the
// module. A syntax error is then yaml.v3's own (*SyntaxError), and a text
// the check does not model an *UncheckedError.
func decodeConfig(data []byte) (*schedulerConfig, error) {
	if v, err := checkSyntax(data); v != syntaxOK {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	conf := &schedulerConfig{}
	if doc.Kind == 0 {
		return conf, nil
	}
	d := &decoder{expanding: map[*yaml.Node]bool{}}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if err := d.count(); err != nil {
			return nil, err
		}
		if len(root.Content) != 1 {
			return conf, nil
		}
		root = root.Content[0]
	}
	err := d.decodeStruct(root, "configs.SchedulerConfig", func(key string, v *yaml.Node) (bool, error) {
		switch key {
		case "partitions":
			return true, d.decodeSeq(v, "[]configs.PartitionConfig", func(item *yaml.Node) error {
				p, err := d.decodePartition(item)
				conf.partitions = append(conf.partitions, p)
				return err
			})
		case "checksum":
			_, err := d.decodeString(v)
			return true, err
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	if len(d.terrors) > 0 {
		return nil, &typeError{errors: d.terrors}
	}
	return conf, nil
}

func (d *decoder) decodePartition(n *yaml.Node) (partitionConfig, error) {
	var p partitionConfig
	err := d.decodeStruct(n, "configs.PartitionConfig", func(key string, v *yaml.Node) (bool, error) {
		var err error
		switch key {
		case "name":
			p.name, err = d.decodeString(v)
		case "queues":
			p.hasQueue = !isNull(v)
			err = d.decodeSeq(v, "[]configs.QueueConfig", func(item *yaml.Node) error {
				q, err := d.decodeQueue(item)
				p.queues = append(p.queues, q)
				return err
			})
		case "placementrules":
			err = d.decodeSeq(v, "[]configs.PlacementRule", func(item *yaml.Node) error {
				r, err := d.decodeRule(item)
				p.rules = append(p.rules, r)
				return err
			})
		case "usergroupresolver":
			err = d.decodeStruct(v, "configs.UserGroupResolver", func(key string, v *yaml.Node) (bool, error) {
				if key != "type" {
					return false, nil
				}
				var err error
				p.resolver, err = d.decodeString(v)
				return true, err
			})
		case "limits":
			p.limits, err = d.decodeLimits(v)
		case "preemption":
			err = d.decodeStruct(v, "configs.PartitionPreemptionConfig", func(key string, v *yaml.Node) (bool, error) {
				switch key {
				case "enabled", "quotapreemptionenabled":
					_, err := d.decodeBool(v)
					return true, err
				}
				return false, nil
			})
		case "nodesortpolicy":
			err = d.decodeStruct(v, "configs.NodeSortingPolicy", func(key string, v *yaml.Node) (bool, error) {
				var err error
				switch key {
				case "type":
					p.nodeSort, err = d.decodeString(v)
				case "resourceweights":
					err = d.decodeMap(v, "map[string]float64", func(k string, v *yaml.Node) (bool, error) {
						f, ok, err := d.decodeFloat(v)
						if ok {
							if p.weights == nil {
								p.weights = map[string]float64{}
							}
							p.weights[k] = f
						}
						return ok, err
					})
				default:
					return false, nil
				}
				return true, err
			})
		default:
			return false, nil
		}
		return true, err
	})
	return p, err
}

func (d *decoder) decodeQueue(n *yaml.Node) (queueConfig, error) {
	var q queueConfig
	err := d.decodeStruct(n, "configs.QueueConfig", func(key string, v *yaml.Node) (bool, error) {
		var err error
		switch key {
		case "name":
			q.name, err = d.decodeString(v)
		case "parent":
			q.parent, err = d.decodeBool(v)
		case "resources":
			q.guaranteed, q.max, err = d.decodeResources(v)
		case "maxapplications":
			q.maxApps, err = d.decodeUint(v)
		case "properties":
			_, err = d.decodeStringMap(v)
		case "adminacl":
			q.adminACL, err = d.decodeString(v)
		case "submitacl":
			q.submitACL, err = d.decodeString(v)
		case "childtemplate":
			err = d.decodeStruct(v, "configs.ChildTemplate", func(key string, v *yaml.Node) (bool, error) {
				var err error
				switch key {
				case "maxapplications":
					_, err = d.decodeUint(v)
				case "properties":
					_, err = d.decodeStringMap(v)
				case "resources":
					_, _, err = d.decodeResources(v)
				default:
					return false, nil
				}
				return true, err
			})
		case "queues":
			err = d.decodeSeq(v, "[]configs.QueueConfig", func(item *yaml.Node) error {
				c, err := d.decodeQueue(item)
				q.queues = append(q.queues, c)
				return err
			})
		case "limits":
			q.limits, err = d.decodeLimits(v)
		default:
			return false, nil
		}
		return true, err
	})
	return q, err
}

// decodeResources reads a Resources object: its guaranteed and max maps.
func (d *decoder) decodeResources(n *yaml.Node) (guaranteed, max map[string]string, err error) {
	err = d.decodeStruct(n, "configs.Resources", func(key string, v *yaml.Node) (bool, error) {
		var err error
		switch key {
		case "guaranteed":
			guaranteed, err = d.decodeStringMap(v)
		case "max":
			max, err = d.decodeStringMap(v)
		default:
			return false, nil
		}
		return true, err
	})
	return guaranteed, max, err
}

func (d *decoder) decodeLimits(n *yaml.Node) ([]limitConfig, error) {
	var out []limitConfig
	err := d.decodeSeq(n, "[]configs.Limit", func(item *yaml.Node) error {
		var l limitConfig
		err := d.decodeStruct(item, "configs.Limit", func(key string, v *yaml.Node) (bool, error) {
			var err error
			switch key {
			case "limit":
				l.limit, err = d.decodeString(v)
			case "users":
				l.users, err = d.decodeStrings(v)
			case "groups":
				l.groups, err = d.decodeStrings(v)
			case "maxresources":
				l.maxResources, err = d.decodeStringMap(v)
			case "maxapplications":
				l.maxApps, err = d.decodeUint(v)
			default:
				return false, nil
			}
			return true, err
		})
		out = append(out, l)
		return err
	})
	if out == nil && err == nil && isSeq(n) {
		out = []limitConfig{}
	}
	return out, err
}

func (d *decoder) decodeRule(n *yaml.Node) (ruleConfig, error) {
	var r ruleConfig
	err := d.decodeStruct(n, "configs.PlacementRule", func(key string, v *yaml.Node) (bool, error) {
		var err error
		switch key {
		case "name":
			r.name, err = d.decodeString(v)
		case "create":
			r.create, err = d.decodeBool(v)
		case "value":
			r.value, err = d.decodeString(v)
		case "parent":
			if isNull(v) {
				r.parent = nil
				return true, d.visit(v, func(*yaml.Node) error { return nil })
			}
			var p ruleConfig
			p, err = d.decodeRule(v)
			r.parent = &p
		case "filter":
			err = d.decodeStruct(v, "configs.Filter", func(key string, v *yaml.Node) (bool, error) {
				var err error
				switch key {
				case "type":
					r.filter.kind, err = d.decodeString(v)
				case "users":
					r.filter.users, err = d.decodeStrings(v)
				case "groups":
					r.filter.groups, err = d.decodeStrings(v)
				default:
					return false, nil
				}
				return true, err
			})
		default:
			return false, nil
		}
		return true, err
	})
	return r, err
}

// deref follows aliases.
func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = deref(n)
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

func isSeq(n *yaml.Node) bool {
	n = deref(n)
	return n != nil && n.Kind == yaml.SequenceNode
}

// decoder walks the node tree as yaml.v3's decoder walks it into
// core's structs: problems of type and of unknown or repeated keys are
// collected (terrors) and decoding goes on, as there; aliasing beyond
// yaml.v3's bounds, an anchor holding itself and a bad merge stop it.
type decoder struct {
	decodes, aliased, aliasDepth int
	terrors                      []string
	expanding                    map[*yaml.Node]bool // aliases being expanded
	mergedFields                 map[string]bool     // keys a merge may no longer set
}

// visit is one decode of n (yaml.v3's unmarshal): counted, and followed
// through an alias, counting again, to the node f decodes.
func (d *decoder) visit(n *yaml.Node, f func(n *yaml.Node) error) error {
	if err := d.count(); err != nil {
		return err
	}
	if n.Kind != yaml.AliasNode {
		return f(n)
	}
	if d.expanding[n] {
		return fatal("anchor '%s' value contains itself", n.Value)
	}
	d.expanding[n] = true
	d.aliasDepth++
	err := d.visit(n.Alias, f)
	d.aliasDepth--
	delete(d.expanding, n)
	return err
}

// terror records yaml.v3's "cannot unmarshal" for n decoded into typeName.
func (d *decoder) terror(n *yaml.Node, typeName string) {
	tag := n.ShortTag()
	value := ""
	if tag != "!!seq" && tag != "!!map" {
		value = n.Value
		if len(value) > 10 {
			value = " `" + value[:7] + "...`"
		} else {
			value = " `" + value + "`"
		}
	}
	d.terrors = append(d.terrors, fmt.Sprintf("line %d: cannot unmarshal %s%s into %s", n.Line, tag, value, typeName))
}

// duplicateKeys records yaml.v3's check of a mapping's keys, made before
// the mapping is decoded into anything; true when it found some (the
// mapping is then not decoded).
func (d *decoder) duplicateKeys(n *yaml.Node) bool {
	before := len(d.terrors)
	for i := 0; i < len(n.Content); i += 2 {
		ni := n.Content[i]
		for j := i + 2; j < len(n.Content); j += 2 {
			nj := n.Content[j]
			if ni.Kind == nj.Kind && ni.Value == nj.Value {
				d.terrors = append(d.terrors, fmt.Sprintf("line %d: mapping key %q already defined at line %d", nj.Line, nj.Value, ni.Line))
			}
		}
	}
	return len(d.terrors) > before
}

// wrong records n (not null) decoded into a typeName it does not fit.
func (d *decoder) wrong(n *yaml.Node, typeName string) {
	if n.Kind == yaml.MappingNode && d.duplicateKeys(n) {
		return
	}
	d.terror(n, typeName)
}

// decodeKey decodes a mapping key into a string: ok is false when the
// pair is skipped (a null key, silently; a mapping or sequence, with a
// type error).
func (d *decoder) decodeKey(n *yaml.Node) (key string, ok bool, err error) {
	err = d.visit(n, func(n *yaml.Node) error {
		switch {
		case isNull(n):
		case n.Kind == yaml.ScalarNode:
			key, ok = n.Value, true
		default:
			d.wrong(n, "string")
		}
		return nil
	})
	return key, ok, err
}

// decodeMapping decodes a mapping into a struct or a map: value is called
// with each key in order; then a merge ("<<"), whose keys set only what
// the mapping itself did not, is decoded with again.
func (d *decoder) decodeMapping(n *yaml.Node, value func(key string, keyNode, v *yaml.Node) error, again func(*yaml.Node) error) error {
	if d.duplicateKeys(n) {
		return nil
	}
	merged := d.mergedFields
	d.mergedFields = nil
	var mergeNode *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		ni := n.Content[i]
		if isMerge(ni) {
			mergeNode = n.Content[i+1]
			continue
		}
		key, ok, err := d.decodeKey(ni)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if merged != nil {
			if merged[key] {
				continue
			}
			merged[key] = true
		}
		if err := value(key, ni, n.Content[i+1]); err != nil {
			return err
		}
	}
	d.mergedFields = merged
	if mergeNode != nil {
		return d.merge(n, mergeNode, again)
	}
	return nil
}

// merge is yaml.v3's merge: the parent's own keys win over the merged
// mappings', and the first merged mapping over the later ones.
func (d *decoder) merge(parent, merge *yaml.Node, again func(*yaml.Node) error) error {
	outer := d.mergedFields
	if outer == nil {
		d.mergedFields = map[string]bool{}
		for i := 0; i < len(parent.Content); i += 2 {
			if err := d.count(); err != nil {
				return err
			}
			if k := deref(parent.Content[i]); k.Kind == yaml.ScalarNode && !isNull(k) {
				d.mergedFields[k.Value] = true
			}
		}
	}
	const wantMap = "map merge requires map or sequence of maps as the value"
	var err error
	switch merge.Kind {
	case yaml.MappingNode:
		err = again(merge)
	case yaml.AliasNode:
		if merge.Alias != nil && merge.Alias.Kind != yaml.MappingNode {
			return fatal(wantMap)
		}
		err = again(merge)
	case yaml.SequenceNode:
		for _, ni := range merge.Content {
			if ni.Kind == yaml.AliasNode {
				if ni.Alias != nil && ni.Alias.Kind != yaml.MappingNode {
					return fatal(wantMap)
				}
			} else if ni.Kind != yaml.MappingNode {
				return fatal(wantMap)
			}
			if err = again(ni); err != nil {
				break
			}
		}
	default:
		return fatal(wantMap)
	}
	d.mergedFields = outer
	return err
}

func isMerge(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Value == "<<" && (n.Tag == "" || n.Tag == "!" || n.ShortTag() == "!!merge")
}

// decodeStruct decodes n into the struct typeName: field is called with
// each key and reports whether the struct has it; a key it does not have
// is an error (KnownFields). null is the zero value.
func (d *decoder) decodeStruct(n *yaml.Node, typeName string, field func(key string, v *yaml.Node) (bool, error)) error {
	var again func(*yaml.Node) error
	again = func(n *yaml.Node) error {
		return d.visit(n, func(n *yaml.Node) error {
			switch {
			case isNull(n):
				return nil
			case n.Kind != yaml.MappingNode:
				d.wrong(n, typeName)
				return nil
			}
			return d.decodeMapping(n, func(key string, keyNode, v *yaml.Node) error {
				known, err := field(key, v)
				if err == nil && !known {
					d.terrors = append(d.terrors, fmt.Sprintf("line %d: field %s not found in type %s", keyNode.Line, key, typeName))
				}
				return err
			}, again)
		})
	}
	return again(n)
}

// decodeSeq decodes n into the list typeName, item for item.
func (d *decoder) decodeSeq(n *yaml.Node, typeName string, item func(*yaml.Node) error) error {
	return d.visit(n, func(n *yaml.Node) error {
		switch {
		case isNull(n):
			return nil
		case n.Kind != yaml.SequenceNode:
			d.wrong(n, typeName)
			return nil
		}
		for _, c := range n.Content {
			if isNull(c) {
				// yaml.v3 drops a null item from a slice of structs or
				// strings (it cannot set one to null).
				continue
			}
			if err := item(c); err != nil {
				return err
			}
		}
		return nil
	})
}

// decodeMap decodes n into the map typeName; value decodes one value and
// reports whether it was set.
func (d *decoder) decodeMap(n *yaml.Node, typeName string, value func(key string, v *yaml.Node) (bool, error)) error {
	var again func(*yaml.Node) error
	again = func(n *yaml.Node) error {
		return d.visit(n, func(n *yaml.Node) error {
			switch {
			case isNull(n):
				return nil
			case n.Kind != yaml.MappingNode:
				d.wrong(n, typeName)
				return nil
			}
			return d.decodeMapping(n, func(key string, _, v *yaml.Node) error {
				_, err := value(key, v)
				return err
			}, again)
		})
	}
	return again(n)
}

// decodeStringMap decodes a map of strings (properties, resource
// quantities): nil when null or absent, else a map, empty if need be.
func (d *decoder) decodeStringMap(n *yaml.Node) (map[string]string, error) {
	var out map[string]string
	if deref(n) != nil && deref(n).Kind == yaml.MappingNode {
		out = map[string]string{}
	}
	err := d.decodeMap(n, "map[string]string", func(k string, v *yaml.Node) (bool, error) {
		s, ok, err := d.decodeStringOK(v)
		if ok || isNull(v) {
			if _, set := out[k]; !set || ok {
				out[k] = s
			}
		}
		return ok, err
	})
	return out, err
}

// decodeStrings decodes a list of strings: nil when null, else a list
// (without null items, which yaml.v3 drops).
func (d *decoder) decodeStrings(n *yaml.Node) ([]string, error) {
	var out []string
	if isSeq(n) {
		out = []string{}
	}
	err := d.decodeSeq(n, "[]string", func(item *yaml.Node) error {
		s, ok, err := d.decodeStringOK(item)
		if ok {
			out = append(out, s)
		}
		return err
	})
	return out, err
}

// decodeString: any scalar gives its text, as yaml.v3 sets a string
// field; null gives "".
func (d *decoder) decodeString(n *yaml.Node) (string, error) {
	s, _, err := d.decodeStringOK(n)
	return s, err
}

func (d *decoder) decodeStringOK(n *yaml.Node) (s string, ok bool, err error) {
	err = d.visit(n, func(n *yaml.Node) error {
		switch {
		case isNull(n):
		case n.Kind == yaml.ScalarNode:
			s, ok = n.Value, true
		default:
			d.wrong(n, "string")
		}
		return nil
	})
	return s, ok, err
}

// decodeBool accepts YAML 1.2 booleans, and the YAML 1.1 words yaml.v3
// accepts for a bool field (yes, on, n, ...); anything else is an error.
func (d *decoder) decodeBool(n *yaml.Node) (b bool, err error) {
	err = d.visit(n, func(n *yaml.Node) error {
		if isNull(n) {
			return nil
		}
		if n.Kind == yaml.ScalarNode {
			switch n.ShortTag() {
			case "!!bool":
				switch n.Value {
				case "true", "True", "TRUE":
					b = true
					return nil
				case "false", "False", "FALSE":
					return nil
				}
			case "!!str":
				switch n.Value {
				case "y", "Y", "yes", "Yes", "YES", "on", "On", "ON":
					b = true
					return nil
				case "n", "N", "no", "No", "NO", "off", "Off", "OFF":
					return nil
				}
			}
		}
		d.wrong(n, "bool")
		return nil
	})
	return b, err
}

// decodeUint accepts what yaml.v3 puts in a uint64: a non-negative
// integer (decimal, 0x, 0o, 0b, underscores) or a float with no fraction.
func (d *decoder) decodeUint(n *yaml.Node) (v uint64, err error) {
	err = d.visit(n, func(n *yaml.Node) error {
		if isNull(n) {
			return nil
		}
		if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!int" || n.ShortTag() == "!!float") {
			if n.Decode(&v) == nil {
				return nil
			}
		}
		d.wrong(n, "uint64")
		return nil
	})
	return v, err
}

func (d *decoder) decodeFloat(n *yaml.Node) (v float64, ok bool, err error) {
	err = d.visit(n, func(n *yaml.Node) error {
		if isNull(n) {
			return nil
		}
		if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!int" || n.ShortTag() == "!!float") {
			if n.Decode(&v) == nil {
				ok = true
				return nil
			}
		}
		d.wrong(n, "float64")
		return nil
	})
	return v, ok, err
}

// lower is strings.ToLower, named for what core does with queue names.
func lower(s string) string { return strings.ToLower(s) }

// count is yaml.v3's excessive-aliasing rule, made at every decode: past
// 1,000 decodes and 100 made inside aliases, the share made inside
// aliases may not exceed 99% (up to 400,000 decodes), falling to 10% at
// 4,000,000. A document built to expand through aliases (each alias of
// an alias doubling the work) is refused as the core refuses it, instead
// of being walked for as long as it takes.
func (d *decoder) count() error {
	d.decodes++
	if d.aliasDepth > 0 {
		d.aliased++
	}
	if d.aliased > 100 && d.decodes > 1000 && float64(d.aliased)/float64(d.decodes) > allowedAliasRatio(d.decodes) {
		return fatal("document contains excessive aliasing")
	}
	return nil
}

func allowedAliasRatio(decodes int) float64 {
	const low, high = 400000, 4000000
	switch {
	case decodes <= low:
		return 0.99
	case decodes >= high:
		return 0.10
	}
	return 0.99 - 0.89*(float64(decodes-low)/float64(high-low))
}
