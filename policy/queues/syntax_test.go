package queues

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"
)

// yamlV3Parse is what decodeConfig asked of yaml.v3 before the syntax
// check: its parse error, recovered here (natively yaml.v3 recovers its own
// panics; a panic it does not recover is reported as one).
func yamlV3Parse(text string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml.v3 panicked: %v", r)
		}
	}()
	var doc yaml.Node
	return yaml.Unmarshal([]byte(text), &doc)
}

// SyntaxSeeds are valid queues.yaml texts in the YAML styles real
// configurations use; the mutation tests (here and in host/conformance,
// on the built module) break them.
var SyntaxSeeds = []string{
	"partitions:\n  - name: default\n    placementrules:\n      - name: tag\n        value: namespace\n        create: true\n        filter:\n          type: allow\n          users: [\"alice\", 'bob']\n    queues:\n      - name: root\n        submitacl: '*'\n        queues:\n          - name: \"dev\"\n            parent: true\n            resources:\n              max: {memory: 1G, vcore: 10}\n            limits:\n              - limit: x\n                users:\n                - alice\n                maxapplications: 10\n",
	"base: &b {name: root}\npartitions: [{queues: [{<<: *b, submitacl: '*'}]}]\n",
	"# comment\npartitions:\n- name: default # x\n  queues:\n  - name: root\n    properties:\n      application.sort.policy: fifo\n    queues: [ {name: a}, {name: b, submitacl: \"alice bob\"} ]\n",
	"---\npartitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: \"alice,bob dev\"   # users, then groups\n        adminacl: ' '\n        queues:\n          - name: a\n            submitacl: \"\\u0061lice\"\n          - name: b\n            resources:\n              guaranteed:\n                memory: 512Mi\n              max:\n                vcore: \"2\"\n    nodesortpolicy:\n      type: binpacking\n      resourceweights:\n        vcore: 2.0\n...\n",
	"partitions:\r\n  - name: default\r\n    queues:\r\n      - name: root\r\n        queues:\r\n          - name: ü-team\r\n            submitacl: 'it''s'\r\n",
	"partitions:\n  - name: default\n    queues: [{name: root}]\n---\nnot: [valid\n",
	"partitions: [{name: default, queues: [{name: root, submitacl: '*'}]}]\n...\n--- &a b\n- *a\n",
	"partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: |\n          alice,bob\n\n        adminacl: >-\n          carol\n          dev\n        queues:\n          - name: a\n            submitacl: |2+\n               x\n          - name: b\n            adminacl: |-  # comment\n              y\n",
	"partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: a multi-line\n          plain acl\n        queues: []\n    placementrules: []\n    limits:\n    - limit: all\n      users: ['*']\n      maxresources: {memory: 10G}\n",
}

// mutate breaks a text the ways an administrator's typo does.
func mutate(r *rand.Rand, s string) string {
	inserts := []string{"\t", ":", "'", "\"", "[", "]", "{", "}", "&a", "*a", "*zz", " ", "  ", "\n", "- ", "#", ",", "? ", "|", ">", "!",
		"%", "@", "`", "\xff", "\xc3", "\x01", "---", "...", ": ", "&a &b", "<<: *b", "\\", "\\x4", "\"\\q\"", "\n  ", "\n\t", " #"}
	for range 1 + r.IntN(3) {
		i := r.IntN(len(s) + 1)
		switch r.IntN(6) {
		case 0:
			s = s[:i]
		case 1, 2:
			s = s[:i] + inserts[r.IntN(len(inserts))] + s[i:]
		case 3:
			if i < len(s) {
				s = s[:i] + s[i+1:]
			}
		case 4:
			s = s[:i] + inserts[r.IntN(len(inserts))] + s[min(len(s), i+1):]
		case 5: // re-indent a line
			if j := strings.LastIndexByte(s[:i], '\n'); j >= 0 {
				s = s[:j+1] + strings.Repeat(" ", r.IntN(4)) + strings.TrimLeft(s[j+1:], " ")
			}
		}
	}
	return s
}

// TestCheckSyntax_matchesYAMLv3: on mutated texts the check never calls a
// text yaml.v3 refuses safe, never refuses one yaml.v3 parses, and words
// its refusals as yaml.v3 does.
func TestCheckSyntax_matchesYAMLv3(t *testing.T) {
	r := rand.New(rand.NewPCG(20261127, 7))
	n := 40000
	if testing.Short() {
		n = 4000
	}
	var ok, bad, unknown, sameMsg, conservative int
	var wrong, msgs []string
	for i := range n {
		text := SyntaxSeeds[i%len(SyntaxSeeds)]
		if i >= len(SyntaxSeeds) {
			text = mutate(r, text)
		}
		v, err := checkSyntax([]byte(text))
		want := yamlV3Parse(text)
		switch v {
		case syntaxOK:
			ok++
			if want != nil {
				wrong = append(wrong, fmt.Sprintf("called safe, yaml.v3: %v\n%q", want, text))
			}
		case syntaxBad:
			bad++
			var se *SyntaxError
			switch {
			case want == nil && errors.As(err, &se) && se.Line == 0 && readerProblems[se.Problem] && (strings.Contains(text, "\n---") || strings.Contains(text, "\n...")):
				// Bytes yaml.v3 may never decode, after the first
				// document, near where its scanner stopped: refused
				// rather than risk a trap.
				conservative++
			case want == nil:
				wrong = append(wrong, fmt.Sprintf("refused (%v), yaml.v3 parses it\n%q", err, text))
			case want.Error() == err.Error():
				sameMsg++
			default:
				msgs = append(msgs, fmt.Sprintf("ours %q, yaml.v3 %q\n%q", err, want, text))
			}
		case syntaxUnknown:
			unknown++
		}
	}
	t.Logf("%d texts: %d parse, %d refused (%d with yaml.v3's words, %d for a reader error past the first document), %d not modelled",
		n, ok, bad, sameMsg, conservative, unknown)
	for _, w := range wrong[:min(10, len(wrong))] {
		t.Log(w)
	}
	for _, m := range msgs[:min(10, len(msgs))] {
		t.Log(m)
	}
	assert.Empty(t, wrong, "%d texts judged unlike yaml.v3", len(wrong))
	require.Greater(t, bad, n/3)
	assert.GreaterOrEqual(t, float64(sameMsg)/float64(bad), 0.95, "refusals in yaml.v3's words")
	assert.Less(t, unknown, n/5, "texts the check gives up on")
	assert.Less(t, conservative, n/1000, "refusals of texts yaml.v3 parses")
}

// readerProblems are yaml.v3's reader errors (they name no line).
var readerProblems = map[string]bool{"invalid leading UTF-8 octet": true, "incomplete UTF-8 octet sequence": true,
	"invalid trailing UTF-8 octet": true, "invalid length of a UTF-8 sequence": true, "invalid Unicode character": true,
	"control characters are not allowed": true}
