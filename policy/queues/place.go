package queues

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/yunikorn-userinfo/userinfo/policy/boundedre"
)

// Queue is a configured queue.
type Queue struct {
	Name      string // lower case, as core keeps it
	Path      string
	Leaf      bool
	Submit    ACL
	Admin     ACL
	SubmitRaw string // the ACLs as written, for messages
	AdminRaw  string
	parent    *Queue
	children  map[string]*Queue
}

// ACL is core's security.ACL.
type ACL struct {
	all    bool
	users  map[string]bool
	groups map[string]bool
}

var (
	aclUserRegExp  = newNamePattern("_", "_.@-", true) // ^[_a-zA-Z][a-zA-Z0-9_.@-]*[$]?$
	aclGroupRegExp = newNamePattern("_", "_-", false)  // ^[_a-zA-Z][a-zA-Z0-9_-]*$
)

// newACL parses an ACL as core's security.NewACL: "*", or users and
// groups, each a comma-separated list, separated by one space; names that
// are not valid there are dropped.
func newACL(s string) (ACL, error) {
	var a ACL
	if s == "" {
		return a, nil
	}
	fields := strings.Split(s, " ")
	if len(fields) > 2 {
		return a, fmt.Errorf("multiple spaces found in ACL: '%s'", s)
	}
	a.all = strings.TrimSpace(s) == wildcard
	a.users = map[string]bool{}
	users := strings.Split(fields[0], ",")
	if len(users) == 1 && users[0] == wildcard {
		a.all = true
	} else {
		for _, u := range users {
			if u != "" && aclUserRegExp.MatchString(u) {
				a.users[u] = true
			}
		}
	}
	if len(fields) == 2 {
		a.groups = map[string]bool{}
		groups := strings.Split(fields[1], ",")
		switch {
		case a.all:
		case len(groups) == 1 && groups[0] == wildcard:
			a.users = map[string]bool{}
			a.all = true
		default:
			for _, g := range groups {
				if g != "" && aclGroupRegExp.MatchString(g) {
					a.groups[g] = true
				}
			}
		}
	}
	return a, nil
}

// Allows is core's ACL.CheckAccess.
func (a ACL) Allows(u User) bool {
	if a.all || a.users[u.Name] {
		return true
	}
	for _, g := range u.Groups {
		if a.groups[g] {
			return true
		}
	}
	return false
}

// User is the identity YuniKorn checks: core's security.UserGroup.
type User struct {
	Name   string
	Groups []string
}

// CanSubmit is core's Queue.CheckSubmitAccess: the queue's submit or admin
// ACL, or its parent's, up to the root.
func (q *Queue) CanSubmit(u User) bool {
	for cur := q; cur != nil; cur = cur.parent {
		if cur.Submit.Allows(u) || cur.Admin.Allows(u) {
			return true
		}
	}
	return false
}

func buildQueue(conf queueConfig, parent *Queue) (*Queue, error) {
	q := &Queue{Name: lower(conf.name), parent: parent, children: map[string]*Queue{},
		SubmitRaw: conf.submitACL, AdminRaw: conf.adminACL}
	q.Path = q.Name
	if parent != nil {
		q.Path = parent.Path + dot + q.Name
	}
	var err error
	if q.Submit, err = newACL(conf.submitACL); err != nil {
		return nil, fmt.Errorf("queue %s: %w", q.Path, err)
	}
	if q.Admin, err = newACL(conf.adminACL); err != nil {
		return nil, fmt.Errorf("queue %s: %w", q.Path, err)
	}
	q.Leaf = !conf.parent && len(conf.queues) == 0
	for _, c := range conf.queues {
		child, err := buildQueue(c, q)
		if err != nil {
			return nil, err
		}
		q.children[child.Name] = child
	}
	return q, nil
}

func buildPartition(conf partitionConfig) (*Partition, error) {
	root, err := buildQueue(conf.queues[0], nil)
	if err != nil {
		return nil, err
	}
	p := &Partition{Name: conf.name, root: root, resolver: conf.resolver}
	p.rules, p.rulesErr = buildRules(conf.rules)
	return p, nil
}

// Queue finds a configured queue by its full path, case-insensitively,
// as core's partition does; nil if there is none.
func (p *Partition) Queue(path string) *Queue {
	parts := strings.Split(lower(path), dot)
	if len(parts) == 0 || parts[0] != rootQueue {
		return nil
	}
	q := p.root
	for _, part := range parts[1:] {
		if q = q.children[part]; q == nil {
			return nil
		}
	}
	return q
}

// App is what the shim tells the scheduler about a new application.
type App struct {
	User User
	// Queue is the queue the pod names (label or annotation), or "".
	Queue string
	// Tags are the application's tags: "namespace", and
	// "namespace.parentqueue" when the namespace has that annotation.
	Tags map[string]string
}

// Step is what one placement rule did, for messages.
type Step struct {
	Rule   string // the rule's name and its chain, e.g. "tag(namespace)"
	Queue  string // the queue it gave, "" if it gave none
	Reason string // why that queue was not used; "" if it was
}

// Placement is the outcome of Place.
type Placement struct {
	// Queue is where the application goes; "" when it is rejected.
	Queue string
	// Err is core's rejection: "application rejected: no placement rule
	// matched", or the error of a rule that failed.
	Err   error
	Steps []Step
}

// Explain says why a placement was rejected (Err is set), for messages:
// ": <the rejection>", then " (queue <requested> requested)" when the
// application asked for a queue (requested is that name already quoted by
// the caller, "" for none), then each rule's step. Both the queue check and
// the audit of running Pods word their refusals with it.
func (p Placement) Explain(requested string) string {
	var b strings.Builder
	if p.Err == ErrRejected {
		b.WriteString(": no placement rule gives a queue it may submit to")
	} else {
		b.WriteString(": " + p.Err.Error())
	}
	if requested != "" {
		b.WriteString(" (queue " + requested + " requested)")
	}
	for i, st := range p.Steps {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString("rule " + st.Rule)
		if st.Queue != "" {
			b.WriteString(" gave " + st.Queue)
		}
		if st.Reason != "" {
			b.WriteString(": " + st.Reason)
		}
	}
	return b.String()
}

// errNotBelowRoot is a queue name core cannot walk up from.
var errNotBelowRoot = errors.New("queue name is not below root")

// ErrRejected is core's placement.ErrorRejected.
var ErrRejected = errors.New("application rejected: no placement rule matched")

// Place runs the partition's placement rules for app as core's
// AppPlacementManager.PlaceApplication does, for an application that is
// not force-created (a new pod).
func (p *Partition) Place(app App) Placement {
	var out Placement
	if p.rulesErr != nil {
		out.Err = ErrRejected
		out.Steps = append(out.Steps, Step{Rule: "placement rules", Reason: "the rules could not be built: " + p.rulesErr.Error()})
		return out
	}
	rules := p.rules
	if rules == nil {
		rules = []rule{{kind: "provided", filter: filter{allow: true, empty: true}}}
	}
	var queueName string
	// core appends a recovery rule, which gives nothing for a new pod but
	// counts as the last rule: the default-queue fallback happens after it.
	for i := 0; i <= len(rules); i++ {
		last := i == len(rules)
		step := Step{Rule: "recovery"}
		queueName = ""
		if !last {
			r := rules[i]
			step.Rule = r.describe()
			var err error
			queueName, err = r.place(app, p)
			if err != nil {
				step.Reason = err.Error()
				out.Steps = append(out.Steps, step)
				out.Err = err
				return out
			}
		}
		if last && queueName == "" && p.Queue(DefaultQueue) != nil {
			queueName = DefaultQueue
			step.Rule = "default queue"
		}
		if queueName == "" {
			if !last {
				step.Reason = "gave no queue"
				out.Steps = append(out.Steps, step)
			}
			continue
		}
		step.Queue = queueName
		if q := p.Queue(queueName); q == nil {
			cur := queueName
			for q == nil {
				i := strings.LastIndex(cur, dot)
				if i < 0 {
					// core slices at -1 here and panics: a fixed rule
					// whose value starts with "root" but is not below it.
					step.Reason = "yunikorn-core v1.9 fails on this queue name (it is not below root)"
					out.Steps = append(out.Steps, step)
					out.Err = errNotBelowRoot
					return out
				}
				cur = cur[:i]
				q = p.Queue(cur)
			}
			if !q.CanSubmit(app.User) {
				step.Reason = "submit access denied on " + q.Path + " (to create " + queueName + ")" + q.aclChain()
				out.Steps = append(out.Steps, step)
				queueName = ""
				continue
			}
		} else {
			if !q.Leaf {
				step.Reason = "not a leaf queue"
				out.Steps = append(out.Steps, step)
				queueName = ""
				continue
			}
			if !q.CanSubmit(app.User) {
				step.Reason = "submit access denied on " + q.Path + q.aclChain()
				out.Steps = append(out.Steps, step)
				queueName = ""
				continue
			}
		}
		out.Steps = append(out.Steps, step)
		break
	}
	if queueName == "" {
		out.Err = ErrRejected
		return out
	}
	out.Queue = queueName
	return out
}

// aclChain lists the ACLs from q up to the root, as " (submitacl ...,
// adminacl ... on each)".
func (q *Queue) aclChain() string {
	var b strings.Builder
	b.WriteString(": ")
	for cur := q; cur != nil; cur = cur.parent {
		if cur != q {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s submitacl %q adminacl %q", cur.Path, cur.SubmitRaw, cur.AdminRaw)
	}
	return b.String()
}

// rule is one configured placement rule.
type rule struct {
	kind      string // provided, user, tag, fixed
	create    bool
	filter    filter
	parent    *rule
	value     string // the tag name or the fixed queue, lower-cased
	qualified bool   // a fixed queue starting with "root"
}

func buildRules(confs []ruleConfig) ([]rule, error) {
	var out []rule
	for _, c := range confs {
		r, err := newRule(c)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func newRule(c ruleConfig) (rule, error) {
	r := rule{kind: lower(c.name), create: c.create}
	switch r.kind {
	case "user", "provided":
	case "tag":
		r.value = lower(c.value)
		if r.value == "" {
			return r, fmt.Errorf("a tag queue rule must have a tag name set")
		}
	case "fixed":
		r.value = lower(c.value)
		if r.value == "" {
			return r, fmt.Errorf("a fixed queue rule must have a queue name set")
		}
		for _, part := range strings.Split(r.value, dot) {
			if !queueNameRegExp.MatchString(part) {
				return r, errInvalidQueueName
			}
		}
		r.qualified = strings.HasPrefix(r.value, rootQueue)
		if r.qualified && c.parent != nil {
			return r, fmt.Errorf("cannot have a fixed queue rule with qualified queue getName and a parent rule")
		}
	case "recovery":
		return r, fmt.Errorf("recovery rule cannot be part of the config, failing placement rule config")
	default:
		return r, fmt.Errorf("unknown rule name specified %s, failing placement rule config", c.name)
	}
	r.filter = newFilter(c.filter)
	if c.parent != nil {
		p, err := newRule(*c.parent)
		if err != nil {
			return r, err
		}
		r.parent = &p
	}
	return r, nil
}

func (r rule) describe() string {
	s := r.kind
	if r.value != "" {
		s += "(" + r.value + ")"
	}
	if r.parent != nil {
		s = r.parent.describe() + " -> " + s
	}
	return s
}

// place is the rule's placeApplication: a queue name, "" for no match, or
// an error that rejects the application.
func (r rule) place(app App, p *Partition) (string, error) {
	var child string
	switch r.kind {
	case "provided":
		if app.Queue == "" {
			return "", nil
		}
		if !r.filter.allows(app.User) {
			return "", nil
		}
		child = app.Queue
	case "tag":
		v := app.Tags[r.value]
		if v == "" {
			return "", nil
		}
		if !r.filter.allows(app.User) {
			return "", nil
		}
		child = v
	case "user":
		if !r.filter.allows(app.User) {
			return "", nil
		}
		child = replaceDot(app.User.Name)
		if !queueNameRegExp.MatchString(child) {
			return "", errInvalidQueueName
		}
		return r.under(child, app, p)
	case "fixed":
		if !r.filter.allows(app.User) {
			return "", nil
		}
		if r.qualified {
			return r.exists(r.value, p), nil
		}
		return r.under(r.value, app, p)
	}
	// provided and tag: a fully qualified name is used as it is
	if strings.HasPrefix(child, rootQueue+dot) {
		for _, part := range strings.Split(child, dot) {
			if !queueNameRegExp.MatchString(part) {
				return "", errInvalidQueueName
			}
		}
		return r.exists(child, p), nil
	}
	child = replaceDot(child)
	if !queueNameRegExp.MatchString(child) {
		return "", errInvalidQueueName
	}
	return r.under(child, app, p)
}

// under puts child below the parent rule's queue (or the root).
func (r rule) under(child string, app App, p *Partition) (string, error) {
	parent := ""
	if r.parent != nil {
		var err error
		parent, err = r.parent.place(app, p)
		if err != nil {
			return "", err
		}
		if parent == "" {
			return "", nil
		}
		if !strings.HasPrefix(parent, rootQueue+dot) {
			parent = rootQueue + dot + parent
		}
		if q := p.Queue(parent); q != nil && q.Leaf {
			return "", fmt.Errorf("parent rule returned a leaf queue: %s", parent)
		}
	}
	if parent == "" {
		parent = rootQueue
	}
	return r.exists(parent+dot+child, p), nil
}

// exists returns name when the queue exists or the rule may create it.
func (r rule) exists(name string, p *Partition) string {
	if !r.create && p.Queue(name) == nil {
		return ""
	}
	return name
}

func replaceDot(s string) string { return strings.ReplaceAll(s, dot, dotReplace) }

// filter is core's placement Filter.
type filter struct {
	allow, empty      bool
	users, groups     map[string]bool
	userExp, groupExp *regexp.Regexp
}

func newFilter(c filterConfig) filter {
	f := filter{empty: len(c.users) == 0 && len(c.groups) == 0, allow: c.kind != "deny"}
	f.users, f.userExp = filterList(c.users, userRegExp)
	f.groups, f.groupExp = filterList(c.groups, groupRegExp)
	return f
}

// filterList reads a filter's users or groups as core does: one entry
// with a regular-expression character is a pattern (one that does not
// compile matches nothing); otherwise the entries that are valid names.
func filterList(list []string, valid *namePattern) (map[string]bool, *regexp.Regexp) {
	names := map[string]bool{}
	if len(list) == 1 && specialRegExp.MatchString(list[0]) {
		re, _ := boundedre.Compile(list[0])
		return names, re
	}
	for _, n := range list {
		if valid.MatchString(n) {
			names[n] = true
		}
	}
	return names, nil
}

func (f filter) allows(u User) bool {
	if f.empty {
		return f.allow
	}
	if f.matchUser(u.Name) {
		return f.allow
	}
	for _, g := range u.Groups {
		if f.matchGroup(g) {
			return f.allow
		}
	}
	return !f.allow
}

func (f filter) matchUser(u string) bool {
	if f.userExp != nil {
		return f.userExp.MatchString(u)
	}
	return f.users[u]
}

func (f filter) matchGroup(g string) bool {
	if f.groupExp != nil {
		return f.groupExp.MatchString(g)
	}
	return f.groups[g]
}

// NeedsTag reports whether a placement rule (or a parent rule) reads the
// application tag name, so that a caller fetches what it needs only then.
func (p *Partition) NeedsTag(name string) bool {
	for _, r := range p.rules {
		for cur := &r; cur != nil; cur = cur.parent {
			if cur.kind == "tag" && cur.value == name {
				return true
			}
		}
	}
	return false
}
