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

	"github.com/yunikorn-userinfo/userinfo/internal/fixtures/yamltypos"
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
		text := yamltypos.Seeds[i%len(yamltypos.Seeds)]
		if i >= len(yamltypos.Seeds) {
			text = yamltypos.Break(r, text)
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
