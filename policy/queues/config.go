package queues

import (
	"errors"
	"fmt"
	"strings"

	"github.com/yunikorn-userinfo/userinfo/policy/boundedre"
)

// Names and patterns of yunikorn-core's configs package.
const (
	rootQueue        = "root"
	dot              = "."
	dotReplace       = "_dot_"
	defaultPartition = "default"
	// DefaultQueue is where an application goes when no rule places it,
	// if the queue exists.
	DefaultQueue = "root.default"
	wildcard     = "*"
)

// core's name patterns, matched by hand: each is a first character from
// one set, then characters from another, and for users an optional
// trailing "$". Compiling them as regular expressions would cost a fresh
// module instance (one per evaluation under policy-server) more than the
// whole check; TestPatterns holds each to its regular expression.
var (
	queueNameRegExp = queueNameMatcher{}
	// ^[_a-zA-Z][a-zA-Z0-9:#/_.@-]*[$]?$
	userRegExp = newNamePattern("_", ":#/_.@-", true)
	// ^[_a-zA-Z][a-zA-Z0-9:_.-]*$
	groupRegExp = newNamePattern("_", ":_.-", false)
	// ^[_a-zA-Z][a-zA-Z0-9_]*$
	ruleNameRegExp = newNamePattern("_", "_", false)
	// [\^$*+?()\[{}|]: any of these makes a filter entry a pattern
	specialRegExp = anyOf(`^$*+?()[{}|`)
)

// namePattern matches ^[first][rest]*[$]?$ where first and rest are ASCII
// letters plus the given characters (rest also digits).
type namePattern struct {
	first, rest [256]bool
	dollar      bool
}

func newNamePattern(firstExtra, restExtra string, dollar bool) *namePattern {
	p := &namePattern{dollar: dollar}
	for c := 'a'; c <= 'z'; c++ {
		p.first[c], p.rest[c] = true, true
		p.first[c-'a'+'A'], p.rest[c-'a'+'A'] = true, true
	}
	for c := '0'; c <= '9'; c++ {
		p.rest[c] = true
	}
	for i := 0; i < len(firstExtra); i++ {
		p.first[firstExtra[i]] = true
	}
	for i := 0; i < len(restExtra); i++ {
		p.rest[restExtra[i]] = true
	}
	return p
}

func (p *namePattern) MatchString(s string) bool {
	if p.dollar && len(s) > 1 && s[len(s)-1] == '$' {
		s = s[:len(s)-1]
	}
	if len(s) == 0 || !p.first[s[0]] {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !p.rest[s[i]] {
			return false
		}
	}
	return true
}

type anyOf string

func (a anyOf) MatchString(s string) bool { return strings.ContainsAny(s, string(a)) }

// Config is a parsed and validated queues.yaml.
type Config struct {
	partitions []*Partition
}

// Partition is one partition: its queues and placement rules.
type Partition struct {
	Name string
	root *Queue
	// rules are the placement rules; nil when the rules could not be built,
	// in which case core places nothing (every application is rejected).
	rules    []rule
	rulesErr error
	resolver string
}

// Partition returns the partition named name (case-insensitively, as
// core), or nil.
func (c *Config) Partition(name string) *Partition {
	for _, p := range c.partitions {
		if strings.EqualFold(p.Name, name) {
			return p
		}
	}
	return nil
}

// Parse reads queues.yaml and returns the configuration the scheduler
// would run, or an error saying why the scheduler would refuse it.
func Parse(data []byte) (*Config, error) {
	conf, err := decodeConfig(data)
	if err != nil {
		return nil, err
	}
	parts, name, err := validateConfig(conf)
	if err != nil {
		return nil, fmt.Errorf("partition %s: %w", name, err)
	}
	c := &Config{}
	for _, p := range parts {
		part, err := buildPartition(p)
		if err != nil {
			return nil, fmt.Errorf("partition %s: %w", p.name, err)
		}
		c.partitions = append(c.partitions, part)
	}
	return c, nil
}

// Validate is what yunikorn-core's LoadSchedulerConfigFromByteArray says
// of queues.yaml (and so the scheduler's /ws/v1/validate-conf): nil when
// it loads, else an error whose text is core's, word for word. It does
// not build the queues: core's validation accepts some configurations
// the scheduler then fails to apply (Parse reports those).
func Validate(data []byte) error {
	conf, err := decodeConfig(data)
	if err != nil {
		return err
	}
	_, _, err = validateConfig(conf)
	return err
}

// Check is Validate, and then whether the scheduler could build the
// queues of a configuration core accepts (Parse's error, when Validate's is
// nil), decoding the text once.
func Check(data []byte) (refused, unbuildable error) {
	conf, err := decodeConfig(data)
	if err != nil {
		return err, nil
	}
	parts, _, err := validateConfig(conf)
	if err != nil {
		return err, nil
	}
	for _, p := range parts {
		if _, err := buildPartition(p); err != nil {
			return nil, fmt.Errorf("partition %s: %w", p.name, err)
		}
	}
	return nil, nil
}

// validateConfig is core's Validate: each partition in turn, its checks
// in core's order, the first problem found being the error (with the
// partition it is in). It returns the partitions as core leaves them:
// the default name given, a root queue inserted where needed, partition
// limits given to a root queue that has none.
func validateConfig(conf *schedulerConfig) ([]partitionConfig, string, error) {
	seen := map[string]bool{}
	parts := make([]partitionConfig, 0, len(conf.partitions))
	for i := range conf.partitions {
		p := conf.partitions[i]
		if p.name == "" || lower(p.name) == defaultPartition {
			p.name = defaultPartition
		}
		if seen[lower(p.name)] {
			return nil, p.name, fmt.Errorf("duplicate partition name found with name %s", p.name)
		}
		seen[lower(p.name)] = true
		if err := validatePartition(&p); err != nil {
			return nil, p.name, err
		}
		parts = append(parts, p)
	}
	return parts, "", nil
}

// validatePartition is core's Validate for one partition, check by check
// in core's order: the queue structure, the limits structure, queue
// names, ACL syntax and limits, queue resources, the placement rules, the
// node sorting policy, maxapplications and the limits down the hierarchy.
func validatePartition(p *partitionConfig) error {
	if !p.hasQueue {
		return fmt.Errorf("queue config is not set")
	}
	insertRoot := len(p.queues) != 1 || lower(p.queues[0].name) != rootQueue
	if insertRoot {
		p.queues = []queueConfig{{name: rootQueue, parent: true, queues: p.queues}}
	} else {
		p.queues[0].parent = true
	}
	root := &p.queues[0]
	if root.guaranteed != nil || root.max != nil {
		return fmt.Errorf("root queue must not have resource limits set")
	}
	if len(p.limits) > 0 && len(root.limits) > 0 && !limitsEqual(p.limits, root.limits) {
		return fmt.Errorf("partition limits and root queue limits are not equivalent")
	}
	if len(p.limits) > 0 && len(root.limits) == 0 {
		root.limits = p.limits
	}
	if err := checkQueues(root, 1); err != nil {
		return err
	}
	if _, err := checkQueueResource(root, nil); err != nil {
		return err
	}
	if err := checkPlacementRules(p); err != nil {
		return err
	}
	if err := checkNodeSortingPolicy(p); err != nil {
		return err
	}
	if err := checkQueueMaxApplications(root); err != nil {
		return err
	}
	if err := checkLimitResource(root, map[string]resource{}, map[string]resource{}); err != nil {
		return err
	}
	return checkLimitMaxApplications(root, map[string]uint64{}, map[string]uint64{})
}

func checkACL(acl string) error {
	acl = strings.TrimSpace(acl)
	if acl == "" || acl == wildcard {
		return nil
	}
	if len(strings.Fields(acl)) > 2 {
		return fmt.Errorf("multiple spaces found in ACL: '%s'", acl)
	}
	return nil
}

func checkQueues(q *queueConfig, level int) error {
	if err := checkACL(q.adminACL); err != nil {
		return err
	}
	if err := checkACL(q.submitACL); err != nil {
		return err
	}
	if err := checkLimits(q.limits, q); err != nil {
		return err
	}
	names := map[string]bool{}
	for _, c := range q.queues {
		if !queueNameRegExp.MatchString(c.name) {
			return errInvalidQueueName
		}
		if names[lower(c.name)] {
			return fmt.Errorf("duplicate child name found with name '%s', level %d", c.name, level)
		}
		names[lower(c.name)] = true
	}
	for i := range q.queues {
		if err := checkQueues(&q.queues[i], level+1); err != nil {
			return err
		}
	}
	return nil
}

// errInvalidQueueName is core's common.ErrorInvalidQueueName.
var errInvalidQueueName = errors.New("invalid queue name, max 64 characters consisting of alphanumeric characters and '-', '_', '#', '@', '/', ':' allowed")

func checkPlacementRules(p *partitionConfig) error {
	if len(p.rules) == 0 {
		return nil
	}
	for _, r := range p.rules {
		if err := checkPlacementRule(r); err != nil {
			return err
		}
	}
	type staticPath struct {
		path, chain     string
		create, dynamic bool
		no              int
	}
	var paths []staticPath
	for i, r := range p.rules {
		path, chain, dynamic, err := longestStaticPath(r)
		if err != nil {
			return err
		}
		if strings.Index(path, rootQueue) == 0 {
			paths = append(paths, staticPath{path: path, chain: chain, create: r.create, dynamic: dynamic, no: i})
		}
	}
	for _, sp := range paths {
		i, chain, path := sp.no, sp.chain, sp.path
		parts := strings.Split(lower(path), dot)
		switch result, last := checkHierarchyForPlacement(parts, sp.create, sp.dynamic, p.queues, nil); result {
		case errQueueNotLeaf:
			return fmt.Errorf("placement rule no. #%d (%s) references a queue (%s) which is not a leaf", i, chain, path)
		case errNonExistingQueue:
			return fmt.Errorf("placement rule no. #%d (%s) references non-existing queues (%s) and create is 'false'", i, chain, path)
		case errLastQueueLeaf:
			return fmt.Errorf("placement rule no. #%d (%s) references non-existing queues (%s) which cannot be created because the last queue (%s) in the hierarchy is a leaf", i, chain, path, last)
		}
	}
	return nil
}

func checkPlacementRule(r ruleConfig) error {
	if !ruleNameRegExp.MatchString(r.name) {
		return fmt.Errorf("invalid rule name %s, a name must be a valid identifier", r.name)
	}
	if r.parent != nil {
		if err := checkPlacementRule(*r.parent); err != nil {
			return err
		}
	}
	f := r.filter
	if f.kind != "" && !strings.EqualFold(f.kind, "allow") && !strings.EqualFold(f.kind, "deny") {
		return fmt.Errorf("invalid rule filter type %s, filter type  must be either '', allow or deny", f.kind)
	}
	for _, list := range [][]string{f.users, f.groups} {
		if len(list) == 1 && specialRegExp.MatchString(list[0]) && boundedre.Nesting(list[0]) > boundedre.MaxNesting {
			return &TooComplexError{Pattern: list[0]}
		}
	}
	if len(f.users) == 1 && !userRegExp.MatchString(f.users[0]) {
		if _, err := boundedre.Compile(f.users[0]); err != nil || !specialRegExp.MatchString(f.users[0]) {
			return fmt.Errorf("invalid rule filter user list is not a proper list or regexp: %v", f.users)
		}
	}
	if len(f.groups) == 1 && !groupRegExp.MatchString(f.groups[0]) {
		if _, err := boundedre.Compile(f.groups[0]); err != nil || !specialRegExp.MatchString(f.groups[0]) {
			return fmt.Errorf("invalid rule filter group list is not a proper list or regexp: %v", f.groups)
		}
	}
	return nil
}

type pathCheck int

const (
	placementOK pathCheck = iota
	errQueueNotLeaf
	errNonExistingQueue
	errLastQueueLeaf
)

// checkHierarchyForPlacement is core's check of a rule's static path
// against the configured queues. Like core, it compares the lower-cased
// path with the queue names as written.
func checkHierarchyForPlacement(path []string, create, dynamic bool, conf []queueConfig, parent *queueConfig) (pathCheck, string) {
	name := path[0]
	if len(conf) == 0 {
		if !parent.parent {
			return errLastQueueLeaf, parent.name
		}
		if !create {
			return errNonExistingQueue, ""
		}
		return placementOK, ""
	}
	var found *queueConfig
	for i := range conf {
		if conf[i].name == name {
			found = &conf[i]
			break
		}
	}
	if found == nil {
		if !create {
			return errNonExistingQueue, ""
		}
		return placementOK, ""
	}
	if len(path) == 1 {
		if dynamic {
			if found.parent {
				return placementOK, ""
			}
			return errQueueNotLeaf, ""
		}
		if found.parent {
			return errQueueNotLeaf, ""
		}
		return placementOK, ""
	}
	return checkHierarchyForPlacement(path[1:], create, dynamic, found.queues, found)
}

// longestStaticPath is core's getLongestStaticPath: the fixed prefix of a
// rule chain (parents first), the chain's names, and whether a dynamic
// rule follows. Like core, it compares rule names as written ("Fixed" is
// not "fixed" here).
func longestStaticPath(r ruleConfig) (path, chain string, dynamic bool, err error) {
	for _, c := range ruleChain(r) {
		if chain == "" {
			chain = c.name
		} else {
			chain += "->" + c.name
		}
		if dynamic {
			continue
		}
		if c.name != "fixed" {
			if path == "" {
				path = "<dynamic>"
			}
			dynamic = true
			continue
		}
		if strings.HasPrefix(c.value, rootQueue) {
			if path != "" {
				return path, chain, dynamic, fmt.Errorf("illegal fully qualified 'fixed' rule with value %s", c.value)
			}
			path = c.value
			continue
		}
		if path == "" {
			path = rootQueue
		}
		path += "." + c.value
	}
	return path, chain, dynamic, nil
}

func ruleChain(r ruleConfig) []ruleConfig {
	var out []ruleConfig
	if r.parent != nil {
		out = append(out, ruleChain(*r.parent)...)
	}
	return append(out, r)
}

// TooComplexError is a filter pattern the scheduler accepts but this
// package does not compile (see boundedre.MaxNesting): a configuration holding one
// cannot be checked.
type TooComplexError struct{ Pattern string }

func (e *TooComplexError) Error() string {
	return fmt.Sprintf("placement filter pattern %q nests too deeply for the queue check (more than %d levels once its repetitions are expanded)", e.Pattern, boundedre.MaxNesting)
}

// queueNameMatcher is core's QueueNameRegExp, ^[a-zA-Z0-9_:#/@-]{1,64}$,
// by hand: compiled, the {1,64} becomes 64 nested alternatives, and the
// recursion that compiles them overflows a TinyGo module's 64 KiB stack.
type queueNameMatcher struct{}

func (queueNameMatcher) MatchString(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '_', c == ':', c == '#', c == '/', c == '@', c == '-':
		default:
			return false
		}
	}
	return true
}
