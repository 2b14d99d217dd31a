package queues

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestACL: core's ACL grammar (docs/QUEUES.md), case by case.
func TestACL(t *testing.T) {
	alice := User{Name: "alice", Groups: []string{"dev"}}
	sa := User{Name: "system:serviceaccount:spark:livy", Groups: []string{"system:serviceaccounts"}}
	for _, tc := range []struct {
		acl       string
		alice, sa bool
		wantErr   string
	}{
		{acl: ""},
		{acl: "*", alice: true, sa: true},
		{acl: " *", alice: true, sa: true},
		{acl: "alice", alice: true},
		{acl: " dev", alice: true},
		{acl: "bob dev", alice: true},
		{acl: "alice, bob", alice: true},  // users "alice,", and bob is a group
		{acl: "alice,* dev", alice: true}, // "*" in a list is just an invalid name, alice still listed
		{acl: "bob,* ops"},
		{acl: "bob *", alice: true, sa: true},
		{acl: "* ops", alice: true, sa: true},
		{acl: "system:serviceaccount:spark:livy"}, // colons are not valid ACL user names
		{acl: " system:serviceaccounts"},
		{acl: "a b c", wantErr: "multiple spaces found in ACL: 'a b c'"},
		{acl: "alice  dev", wantErr: "multiple spaces found in ACL: 'alice  dev'"},
	} {
		a, err := newACL(tc.acl)
		if tc.wantErr != "" {
			assert.EqualError(t, err, tc.wantErr, "%q", tc.acl)
			continue
		}
		require.NoError(t, err, "%q", tc.acl)
		assert.Equal(t, tc.alice, a.Allows(alice), "%q for alice", tc.acl)
		assert.Equal(t, tc.sa, a.Allows(sa), "%q for the service account", tc.acl)
	}
}

const config = `
partitions:
  - name: default
    placementrules:
      - name: provided
      - name: tag
        value: namespace
        create: true
        parent:
          name: fixed
          value: tenants
      - name: user
        create: true
        filter:
          type: allow
          groups: [dev]
    queues:
      - name: root
        submitacl: " admins"
        queues:
          - name: sandbox
            submitacl: "*"
          - name: tenants
            parent: true
            submitacl: " analysts"
          - name: dev
            submitacl: "alice"
`

// TestPlace: the rules in order, ACLs on existing and on created queues,
// and the messages of each step.
func TestPlace(t *testing.T) {
	cfg, err := Parse([]byte(config))
	require.NoError(t, err)
	p := cfg.Partition("default")
	require.NotNil(t, p)
	carol := User{Name: "carol", Groups: []string{"analysts"}}
	alice := User{Name: "alice", Groups: []string{"dev"}}
	bob := User{Name: "bob", Groups: []string{"ops"}}
	ns := map[string]string{"namespace": "etl"}

	pl := p.Place(App{User: carol, Queue: "root.sandbox", Tags: ns})
	assert.Equal(t, "root.sandbox", pl.Queue, "provided, open to all")

	pl = p.Place(App{User: carol, Tags: ns})
	assert.Equal(t, "root.tenants.etl", pl.Queue, "no queue given: created below tenants, which carol may submit to")

	pl = p.Place(App{User: alice, Queue: "dev", Tags: ns})
	assert.Equal(t, "root.dev", pl.Queue, "a short provided name is put below root")

	pl = p.Place(App{User: alice, Tags: ns})
	assert.Equal(t, "", pl.Queue)
	assert.ErrorIs(t, pl.Err, ErrRejected)
	assert.Equal(t, []Step{
		{Rule: "provided", Reason: "gave no queue"},
		{Rule: "fixed(tenants) -> tag(namespace)", Queue: "root.tenants.etl",
			Reason: `submit access denied on root.tenants (to create root.tenants.etl): root.tenants submitacl " analysts" adminacl "", root submitacl " admins" adminacl ""`},
		{Rule: "user", Queue: "root.alice",
			Reason: `submit access denied on root (to create root.alice): root submitacl " admins" adminacl ""`},
	}, pl.Steps)

	pl = p.Place(App{User: bob, Queue: "a b", Tags: ns})
	assert.EqualError(t, pl.Err, errInvalidQueueName.Error(), "an invalid provided name rejects at once, whatever the later rules")
}

// TestParse_refused: configurations the scheduler refuses to load.
func TestParse_refused(t *testing.T) {
	for text, want := range map[string]string{
		"partitions: [{name: default}]":                                                        "partition default: queue config is not set",
		"partitions: [{name: default, placementRules: []}]":                                    "yaml: unmarshal errors:\n  line 1: field placementRules not found in type configs.PartitionConfig",
		"partitions: [{queues: [{name: root, submitacl: 'a b c'}]}]":                           "partition default: multiple spaces found in ACL: 'a b c'",
		"partitions: [{queues: [{name: root, submitacl: 'a  b'}]}]":                            "partition default: queue root: multiple spaces found in ACL: 'a  b'",
		"partitions: [{queues: [{name: root, queues: [{name: a.b}]}]}]":                        "partition default: " + errInvalidQueueName.Error(),
		"partitions: [{queues: [{name: root, parent: 'true'}]}]":                               "yaml: unmarshal errors:\n  line 1: cannot unmarshal !!str `true` into bool",
		"partitions: [{queues: [{name: root, queues: [{name: a}, {name: A}]}]}]":               "partition default: duplicate child name found with name 'A', level 1",
		"partitions: [{queues: [{name: root}], placementrules: [{name: fixed, value: nope}]}]": "partition default: placement rule no. #0 (fixed) references non-existing queues (root.nope) and create is 'false'",
	} {
		_, err := Parse([]byte(text))
		assert.EqualError(t, err, want, text)
	}
	// accepted: YAML 1.1 booleans in a bool field, the root inserted, an
	// empty text
	for _, text := range []string{"partitions: [{queues: [{name: a, parent: yes}]}]", "", "partitions: [{queues: [{name: a}, {name: b}]}]"} {
		_, err := Parse([]byte(text))
		assert.NoError(t, err, text)
	}
}

// TestIdentity: core's conversion of the shim's user and groups.
func TestIdentity(t *testing.T) {
	cfg, err := Parse([]byte("partitions: [{queues: [{name: root}]}]"))
	require.NoError(t, err)
	p := cfg.Partition("DEFAULT")
	u, known, err := p.Identity("alice", nil)
	assert.Equal(t, User{Name: "alice", Groups: []string{"alice"}}, u, "no resolver: the user's own name is the group")
	assert.True(t, known)
	assert.NoError(t, err)
	_, _, err = p.Identity("o'brien", []string{"dev"})
	assert.ErrorIs(t, err, ErrInvalidUser)
	_, _, err = p.Identity("", []string{"dev"})
	assert.ErrorIs(t, err, ErrEmptyUser)
	u, _, err = p.Identity("o'brien", nil)
	assert.NoError(t, err, "without groups the name is not checked")
	assert.Equal(t, "o'brien", u.Name)
}

// TestQueueName: the hand-written matcher is core's pattern.
func TestQueueName(t *testing.T) {
	re := regexp.MustCompile(`^[a-zA-Z0-9_:#/@-]{1,64}$`)
	for _, s := range []string{"", "a", "root", "a.b", "a b", "x@y", "team-1_#/:", strings.Repeat("a", 64), strings.Repeat("a", 65), "é", "a\n", "ROOT"} {
		assert.Equal(t, re.MatchString(s), queueNameRegExp.MatchString(s), "%q", s)
	}
}

// TestNesting: a filter pattern too deep for the guest's stack
// (boundedre) makes the configuration uncheckable, not a trap.
func TestNesting(t *testing.T) {
	_, err := Parse([]byte("partitions: [{queues: [{name: root}], placementrules: [{name: user, filter: {users: ['^a{1,64}$']}}]}]"))
	var tooComplex *TooComplexError
	assert.ErrorAs(t, err, &tooComplex)
}

// TestPatterns: the hand-written name patterns are core's regular
// expressions, on names built from every character class they treat
// differently.
func TestPatterns(t *testing.T) {
	for _, tc := range []struct {
		expr string
		m    interface{ MatchString(string) bool }
	}{
		{`^[_a-zA-Z][a-zA-Z0-9:#/_.@-]*[$]?$`, userRegExp},
		{`^[_a-zA-Z][a-zA-Z0-9:_.-]*$`, groupRegExp},
		{`^[_a-zA-Z][a-zA-Z0-9_]*$`, ruleNameRegExp},
		{`[\^$*+?()\[{}|]`, specialRegExp},
		{`^[_a-zA-Z][a-zA-Z0-9_.@-]*[$]?$`, aclUserRegExp},
		{`^[_a-zA-Z][a-zA-Z0-9_-]*$`, aclGroupRegExp},
	} {
		re := regexp.MustCompile(tc.expr)
		chars := []string{"a", "Z", "_", "0", "9", ":", "#", "/", ".", "@", "-", "$", " ", "é", "^", "*", "(", "[", "{", "|", "'", "\n", ""}
		var names []string
		for _, a := range chars {
			for _, b := range chars {
				for _, c := range chars {
					names = append(names, a+b+c)
				}
			}
		}
		names = append(names, "$", "$$", "a$$", "alice$", "system:serviceaccount:ns:sa", "john.doe@example.com")
		for _, n := range names {
			require.Equal(t, re.MatchString(n), tc.m.MatchString(n), "%s on %q", tc.expr, n)
		}
	}
}

// TestParse_aliasBomb: a document whose aliases nest (each level ten of the
// one below: 10^9 queues once expanded) is refused as yaml.v3 refuses it,
// in a few thousand steps instead of being walked.
func TestParse_aliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("partitions:\n  - name: default\n    queues:\n      - name: root\n        queues:\n          - &q0 {name: a}\n")
	for i := 1; i <= 9; i++ {
		refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*q%d, ", i-1), 10), ", ")
		fmt.Fprintf(&b, "          - &q%d {name: l%d, queues: [%s]}\n", i, i, refs)
	}
	began := time.Now()
	_, err := Parse([]byte(b.String()))
	require.ErrorContains(t, err, "document contains excessive aliasing")
	assert.Less(t, time.Since(began), 2*time.Second)
}
