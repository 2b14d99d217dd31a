package queues

import (
	"fmt"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// The configuration as yunikorn-core decodes it (configs.SchedulerConfig
// and its members, with yaml.v3 and KnownFields): only what placement and
// ACLs need is kept, but every key the scheduler knows is accepted and
// every other key is an error, as it is there.

type schedulerConfig struct {
	partitions []partitionConfig
}

type partitionConfig struct {
	name     string
	queues   []queueConfig
	hasQueue bool // queues was given and not null
	rules    []ruleConfig
	resolver string // usergroupresolver.type
}

type queueConfig struct {
	name         string
	parent       bool
	submitACL    string
	adminACL     string
	queues       []queueConfig
	hasResources bool // resources.guaranteed or resources.max set
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

// decodeError is a configuration the scheduler would refuse to load.
type decodeError struct {
	line int
	msg  string
}

func (e *decodeError) Error() string {
	if e.line > 0 {
		return fmt.Sprintf("line %d: %s", e.line, e.msg)
	}
	return e.msg
}

func errAt(n *yaml.Node, format string, args ...any) error {
	return &decodeError{line: n.Line, msg: fmt.Sprintf(format, args...)}
}

// decodeConfig reads queues.yaml as core's ParseAndValidateConfig decodes
// it: the first document only, strict about keys and types; an empty text
// is an empty configuration.
func decodeConfig(data []byte) (*schedulerConfig, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &decodeError{msg: err.Error()}
	}
	conf := &schedulerConfig{}
	d := &decoder{}
	if doc.Kind == 0 {
		return conf, nil
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return conf, nil
		}
		root = root.Content[0]
	}
	err := d.decodeStruct(root, "configs.SchedulerConfig", func(key string, v *yaml.Node) (bool, error) {
		switch key {
		case "partitions":
			return true, d.decodeSeq(v, func(item *yaml.Node) error {
				p, err := d.decodePartition(item)
				if err == nil {
					conf.partitions = append(conf.partitions, p)
				}
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
			err = d.decodeSeq(v, func(item *yaml.Node) error {
				q, err := d.decodeQueue(item)
				if err == nil {
					p.queues = append(p.queues, q)
				}
				return err
			})
		case "placementrules":
			err = d.decodeSeq(v, func(item *yaml.Node) error {
				r, err := d.decodeRule(item)
				if err == nil {
					p.rules = append(p.rules, r)
				}
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
			err = d.decodeSeq(v, d.decodeLimit)
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
				switch key {
				case "type":
					_, err := d.decodeString(v)
					return true, err
				case "resourceweights":
					return true, d.decodeMap(v, func(v *yaml.Node) error { _, err := d.decodeFloat(v); return err })
				}
				return false, nil
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
			q.hasResources, err = d.decodeResources(v)
		case "maxapplications":
			_, err = d.decodeUint(v)
		case "properties":
			err = d.decodeStringMap(v)
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
					err = d.decodeStringMap(v)
				case "resources":
					_, err = d.decodeResources(v)
				default:
					return false, nil
				}
				return true, err
			})
		case "queues":
			err = d.decodeSeq(v, func(item *yaml.Node) error {
				c, err := d.decodeQueue(item)
				if err == nil {
					q.queues = append(q.queues, c)
				}
				return err
			})
		case "limits":
			err = d.decodeSeq(v, d.decodeLimit)
		default:
			return false, nil
		}
		return true, err
	})
	return q, err
}

// d.decodeResources reads a Resources object and reports whether guaranteed
// or max is set (core's root queue may have neither).
func (d *decoder) decodeResources(n *yaml.Node) (bool, error) {
	set := false
	err := d.decodeStruct(n, "configs.Resources", func(key string, v *yaml.Node) (bool, error) {
		switch key {
		case "guaranteed", "max":
			if !isNull(v) {
				set = true
			}
			return true, d.decodeStringMap(v)
		}
		return false, nil
	})
	return set, err
}

func (d *decoder) decodeLimit(n *yaml.Node) error {
	return d.decodeStruct(n, "configs.Limit", func(key string, v *yaml.Node) (bool, error) {
		var err error
		switch key {
		case "limit":
			_, err = d.decodeString(v)
		case "users", "groups":
			_, err = d.decodeStrings(v)
		case "maxresources":
			err = d.decodeStringMap(v)
		case "maxapplications":
			_, err = d.decodeUint(v)
		default:
			return false, nil
		}
		return true, err
	})
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
				return true, nil
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

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "!!map"
	case yaml.SequenceNode:
		return "!!seq"
	}
	return n.ShortTag()
}

// d.decodeStruct walks a mapping as yaml.v3 decodes a struct with
// KnownFields: field calls f for each key; a key f does not know is an
// error, as is a key given twice. "<<" merges other mappings in, keys
// written here winning. null is the zero value.
func (d *decoder) decodeStruct(n *yaml.Node, typeName string, field func(key string, v *yaml.Node) (bool, error)) error {
	if err := d.count(n); err != nil {
		return err
	}
	if n != nil && n.Kind == yaml.AliasNode {
		d.aliasDepth++
		defer func() { d.aliasDepth-- }()
	}
	n = deref(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return errAt(n, "cannot unmarshal %s into %s", kindName(n), typeName)
	}
	pairs, err := mappingPairs(n)
	if err != nil {
		return err
	}
	for _, p := range pairs {
		known, err := field(p.key, p.value)
		if err != nil {
			return err
		}
		if !known {
			return errAt(p.keyNode, "field %s not found in type %s", p.key, typeName)
		}
	}
	return nil
}

type pair struct {
	key     string
	keyNode *yaml.Node
	value   *yaml.Node
}

// mappingPairs lists a mapping's pairs with merges applied.
func mappingPairs(n *yaml.Node) ([]pair, error) {
	var own, merged []pair
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			var sources []*yaml.Node
			switch dv := deref(v); dv.Kind {
			case yaml.MappingNode:
				sources = []*yaml.Node{dv}
			case yaml.SequenceNode:
				for _, s := range dv.Content {
					sources = append(sources, deref(s))
				}
			default:
				return nil, errAt(v, "map merge requires map or sequence of maps as the value")
			}
			for _, s := range sources {
				if s.Kind != yaml.MappingNode {
					return nil, errAt(s, "map merge requires map or sequence of maps as the value")
				}
				sp, err := mappingPairs(s)
				if err != nil {
					return nil, err
				}
				merged = append(merged, sp...)
			}
			continue
		}
		if k.Kind != yaml.ScalarNode {
			return nil, errAt(k, "cannot unmarshal %s into a field name", kindName(k))
		}
		if line, dup := seen[k.Value]; dup {
			return nil, errAt(k, "mapping key %q already defined at line %d", k.Value, line)
		}
		seen[k.Value] = k.Line
		own = append(own, pair{key: k.Value, keyNode: k, value: v})
	}
	out := make([]pair, 0, len(own)+len(merged))
	for _, m := range merged {
		if _, overridden := seen[m.key]; !overridden {
			seen[m.key] = m.keyNode.Line
			out = append(out, m)
		}
	}
	return append(out, own...), nil
}

func (d *decoder) decodeSeq(n *yaml.Node, item func(*yaml.Node) error) error {
	if err := d.count(n); err != nil {
		return err
	}
	if n != nil && n.Kind == yaml.AliasNode {
		d.aliasDepth++
		defer func() { d.aliasDepth-- }()
	}
	n = deref(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		return errAt(n, "cannot unmarshal %s into a list", kindName(n))
	}
	for _, c := range n.Content {
		if err := item(c); err != nil {
			return err
		}
	}
	return nil
}

func (d *decoder) decodeMap(n *yaml.Node, value func(*yaml.Node) error) error {
	if err := d.count(n); err != nil {
		return err
	}
	if n != nil && n.Kind == yaml.AliasNode {
		d.aliasDepth++
		defer func() { d.aliasDepth-- }()
	}
	n = deref(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return errAt(n, "cannot unmarshal %s into a map", kindName(n))
	}
	pairs, err := mappingPairs(n)
	if err != nil {
		return err
	}
	for _, p := range pairs {
		if err := value(p.value); err != nil {
			return err
		}
	}
	return nil
}

// d.decodeString: any scalar gives its text, as yaml.v3 sets a string field;
// null gives "".
func (d *decoder) decodeString(n *yaml.Node) (string, error) {
	if err := d.count(n); err != nil {
		return "", err
	}
	if n != nil && n.Kind == yaml.AliasNode {
		d.aliasDepth++
		defer func() { d.aliasDepth-- }()
	}
	n = deref(n)
	if isNull(n) {
		return "", nil
	}
	if n.Kind != yaml.ScalarNode {
		return "", errAt(n, "cannot unmarshal %s into string", kindName(n))
	}
	return n.Value, nil
}

// decodeStringMap checks a map of strings (properties, resource
// quantities), whose values placement does not use.
func (d *decoder) decodeStringMap(n *yaml.Node) error {
	return d.decodeMap(n, func(v *yaml.Node) error { _, err := d.decodeString(v); return err })
}

func (d *decoder) decodeStrings(n *yaml.Node) ([]string, error) {
	var out []string
	err := d.decodeSeq(n, func(item *yaml.Node) error {
		s, err := d.decodeString(item)
		out = append(out, s)
		return err
	})
	return out, err
}

// d.decodeBool accepts YAML 1.2 booleans, and the YAML 1.1 words yaml.v3
// accepts for a bool field (yes, on, n, ...); anything else is an error.
func (d *decoder) decodeBool(n *yaml.Node) (bool, error) {
	if err := d.count(n); err != nil {
		return false, err
	}
	if n != nil && n.Kind == yaml.AliasNode {
		d.aliasDepth++
		defer func() { d.aliasDepth-- }()
	}
	n = deref(n)
	if isNull(n) {
		return false, nil
	}
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!bool":
			switch n.Value {
			case "true", "True", "TRUE":
				return true, nil
			case "false", "False", "FALSE":
				return false, nil
			}
		case "!!str":
			switch n.Value {
			case "y", "Y", "yes", "Yes", "YES", "on", "On", "ON":
				return true, nil
			case "n", "N", "no", "No", "NO", "off", "Off", "OFF":
				return false, nil
			}
		}
	}
	return false, errAt(n, "cannot unmarshal %s `%s` into bool", kindName(n), n.Value)
}

// d.decodeUint accepts what yaml.v3 puts in a uint64: a non-negative
// integer (decimal, 0x, 0o, 0b, underscores) or a float with no fraction.
func (d *decoder) decodeUint(n *yaml.Node) (uint64, error) {
	if err := d.count(n); err != nil {
		return 0, err
	}
	if n != nil && n.Kind == yaml.AliasNode {
		d.aliasDepth++
		defer func() { d.aliasDepth-- }()
	}
	n = deref(n)
	if isNull(n) {
		return 0, nil
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" {
		var v uint64
		if err := n.Decode(&v); err == nil {
			return v, nil
		}
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float" {
		var v uint64
		if err := n.Decode(&v); err == nil {
			return v, nil
		}
	}
	return 0, errAt(n, "cannot unmarshal %s `%s` into uint64", kindName(n), n.Value)
}

func (d *decoder) decodeFloat(n *yaml.Node) (float64, error) {
	if err := d.count(n); err != nil {
		return 0, err
	}
	if n != nil && n.Kind == yaml.AliasNode {
		d.aliasDepth++
		defer func() { d.aliasDepth-- }()
	}
	n = deref(n)
	if isNull(n) {
		return 0, nil
	}
	var v float64
	if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!int" || n.ShortTag() == "!!float") {
		if err := n.Decode(&v); err == nil {
			return v, nil
		}
	}
	return 0, errAt(n, "cannot unmarshal %s `%s` into float64", kindName(n), n.Value)
}

// lower is strings.ToLower, named for what core does with queue names.
func lower(s string) string { return strings.ToLower(s) }

// decoder counts what it decodes as yaml.v3's decoder does, so that a
// document built to expand through aliases (each alias of an alias
// doubling the work) is refused as the core refuses it, instead of being
// walked for as long as it takes.
type decoder struct {
	decodes, aliased, aliasDepth int
}

// count is yaml.v3's excessive-aliasing rule: past 1,000 decodes and 100
// made inside aliases, the share made inside aliases may not exceed 99%
// (up to 400,000 decodes), falling to 10% at 4,000,000.
func (d *decoder) count(n *yaml.Node) error {
	d.decodes++
	if d.aliasDepth > 0 {
		d.aliased++
	}
	if d.aliased > 100 && d.decodes > 1000 && float64(d.aliased)/float64(d.decodes) > allowedAliasRatio(d.decodes) {
		line := 0
		if n != nil {
			line = n.Line
		}
		return &decodeError{line: line, msg: "document contains excessive aliasing"}
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
