package yunikorn

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// gen writes random queues.yaml texts and applications from small pools
// of names chosen to reach the edges: names the scheduler's patterns
// refuse, case differences, dots, ACL spacing, rule names it does not
// know, filters that are regular expressions, keys and types its strict
// decoder refuses.
type gen struct{ r *rand.Rand }

func (g *gen) pick(s []string) string { return s[g.r.IntN(len(s))] }
func (g *gen) chance(p float64) bool  { return g.r.Float64() < p }

var (
	queueNames = []string{"default", "default", "dev", "Dev", "prod", "sandbox", "analytics", "users", "users", "ops-1", "spark", "root", "x@y", "etl"}
	badQueues  = []string{"team.a", "a b", ""}
	acls       = []string{"", "", "*", "*", "*", " ", "alice", "alice,bob", "alice dev", " dev", " dev", "alice,bob dev,ops", "* dev", "alice *",
		"system:serviceaccount:spark:livy", "john.doe", "alice,* dev", "dev ", "Alice", "carol analysts", " analysts,system:authenticated",
		"bob ops", " *", "*,alice", "nobody", "alice,carol,john.doe dev,analysts", " system:authenticated"}
	badACLs    = []string{"  dev", "alice  dev", "a b c", " a b"}
	ruleNames  = []string{"provided", "provided", "user", "user", "tag", "tag", "tag", "fixed", "fixed", "Fixed", "Provided", "User"}
	oddRules   = []string{"group", "bad name", "recovery", "Tag"}
	tagValues  = []string{"namespace", "namespace", "namespace.parentqueue", "Namespace", "missing", ""}
	fixedVals  = []string{"dev", "root.dev", "root.users", "users", "root", "a.b", "rootx", "", "sandbox", "root.analytics", "Prod"}
	filterType = []string{"", "", "allow", "deny", "Deny", "bogus"}
	filterUsrs = [][]string{nil, nil, nil, {"alice"}, {"^a.*"}, {"alice", "bob"}, {"bad user"}, {"system:serviceaccount:spark:livy"}, {"john.doe", "x y"}, {"^(alice|bob)$"}}
	filterGrps = [][]string{nil, nil, nil, {"dev"}, {"^o.*"}, {"dev", "ops"}, {"system:authenticated"}, {"bad group"}, {"dev", "system:authenticated"}}
	badFilter  = [][]string{{"("}, {"["}}

	users    = []string{"alice", "alice", "bob", "bob", "carol", "john.doe", "system:serviceaccount:spark:livy", "Dave", "nobody", "dave"}
	badUsers = []string{"o'brien", "", "x y", "1abc"}
	groups   = []string{"dev", "ops", "analysts", "system:authenticated", "Dev", "system:serviceaccounts"}
	qnames   = []string{"", "", "dev", "root.dev", "root.Sandbox", "root.users.alice", "team.a", "a b", "root.new", "ROOT.dev", "sandbox",
		"root.analytics.etl", "root.default", "users", "root..x", "root.prod"}
	nsVals = []string{"default", "dev", "spark", "Prod", "a.b", "sandbox", "analytics", "users"}
	pqVals = []string{"", "", "root.users", "users", "root.dev", "root.sandbox", "root.analytics"}
)

// config writes one queues.yaml.
func (g *gen) config() string {
	var b strings.Builder
	b.WriteString("partitions:\n")
	b.WriteString("  - name: default\n")
	if g.chance(0.5) {
		g.rules(&b, "    ", "placementrules")
	}
	if g.chance(0.03) {
		b.WriteString("    placementRules: []\n") // wrong case: refused
	}
	if g.chance(0.05) {
		b.WriteString("    usergroupresolver:\n      type: os\n")
	}
	if g.chance(0.02) {
		return b.String() // no queues: refused
	}
	b.WriteString("    queues:\n")
	if g.chance(0.85) {
		name := "root"
		if g.chance(0.05) {
			name = "ROOT"
		}
		fmt.Fprintf(&b, "      - name: %s\n", name)
		if g.chance(0.3) {
			b.WriteString("        submitacl: '*'\n")
		} else {
			g.acls(&b, "        ")
		}
		if g.chance(0.03) {
			b.WriteString("        resources:\n          max: {memory: 1G}\n")
		}
		b.WriteString("        queues:\n")
		g.queues(&b, "          ", 1)
	} else {
		g.queues(&b, "      ", 1) // no root: inserted
	}
	return b.String()
}

func (g *gen) acls(b *strings.Builder, indent string) {
	acl := func() string {
		if g.chance(0.01) {
			return g.pick(badACLs)
		}
		return g.pick(acls)
	}
	if g.chance(0.6) {
		fmt.Fprintf(b, "%ssubmitacl: %q\n", indent, acl())
	}
	if g.chance(0.3) {
		fmt.Fprintf(b, "%sadminacl: %q\n", indent, acl())
	}
	if g.chance(0.003) {
		fmt.Fprintf(b, "%ssubmitacl: [alice]\n", indent) // wrong type: refused
	}
}

func (g *gen) queues(b *strings.Builder, indent string, depth int) {
	n := 1 + g.r.IntN(3)
	for range n {
		name := g.pick(queueNames)
		if g.chance(0.01) {
			name = g.pick(badQueues)
		}
		fmt.Fprintf(b, "%s- name: %q\n", indent, name)
		inner := indent + "  "
		g.acls(b, inner)
		if g.chance(0.25) {
			v := "true"
			if g.chance(0.1) {
				v = g.pick([]string{"yes", "'true'", "off", "1"})
			}
			fmt.Fprintf(b, "%sparent: %s\n", inner, v)
		}
		if g.chance(0.003) {
			fmt.Fprintf(b, "%ssubmitACL: alice\n", inner) // unknown key: refused
		}
		if depth < 3 && g.chance(0.4) {
			fmt.Fprintf(b, "%squeues:\n", inner)
			g.queues(b, inner+"  ", depth+1)
		}
	}
}

func (g *gen) rules(b *strings.Builder, indent, key string) {
	fmt.Fprintf(b, "%s%s:\n", indent, key)
	n := 1 + g.r.IntN(3)
	for range n {
		g.rule(b, indent+"  ", 0, true)
	}
}

func (g *gen) rule(b *strings.Builder, indent string, depth int, item bool) {
	first := indent
	rest := indent
	if item {
		first = indent + "- "
		rest = indent + "  "
	}
	name := g.pick(ruleNames)
	if g.chance(0.03) {
		name = g.pick(oddRules)
	}
	fmt.Fprintf(b, "%sname: %q\n", first, name)
	if g.chance(0.6) {
		v := "true"
		if g.chance(0.4) {
			v = "false"
		}
		if g.chance(0.05) {
			v = g.pick([]string{"yes", "'true'", "on"})
		}
		fmt.Fprintf(b, "%screate: %s\n", rest, v)
	}
	switch strings.ToLower(name) {
	case "tag":
		if v := g.pick(tagValues); v != "" {
			fmt.Fprintf(b, "%svalue: %q\n", rest, v)
		}
	case "fixed":
		if v := g.pick(fixedVals); v != "" {
			fmt.Fprintf(b, "%svalue: %q\n", rest, v)
		}
	}
	if g.chance(0.3) {
		fmt.Fprintf(b, "%sfilter:\n", rest)
		if t := g.pick(filterType); t != "" {
			fmt.Fprintf(b, "%s  type: %q\n", rest, t)
		}
		u := filterUsrs[g.r.IntN(len(filterUsrs))]
		if g.chance(0.02) {
			u = badFilter[g.r.IntN(len(badFilter))]
		}
		if u != nil {
			fmt.Fprintf(b, "%s  users: [%s]\n", rest, quoteAll(u))
		}
		if gr := filterGrps[g.r.IntN(len(filterGrps))]; gr != nil {
			fmt.Fprintf(b, "%s  groups: [%s]\n", rest, quoteAll(gr))
		}
	}
	if depth < 2 && g.chance(0.35) {
		fmt.Fprintf(b, "%sparent:\n", rest)
		g.rule(b, rest+"  ", depth+1, false)
	}
}

func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}

// app draws one application: the identity the annotation records, the
// queue the pod names and the namespace's tags.
func (g *gen) app() appCase {
	user := g.pick(users)
	if g.chance(0.08) {
		user = g.pick(badUsers)
	}
	c := appCase{user: user, queue: g.pick(qnames), tags: map[string]string{"namespace": g.pick(nsVals)}}
	if pq := g.pick(pqVals); pq != "" {
		c.tags["namespace.parentqueue"] = pq
	}
	if g.chance(0.85) {
		for _, gr := range groups {
			if g.chance(0.35) {
				c.groups = append(c.groups, gr)
			}
		}
	}
	return c
}
