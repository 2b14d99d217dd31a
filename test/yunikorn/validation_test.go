package yunikorn

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/yunikorn-core/pkg/common/configs"
	corelog "github.com/apache/yunikorn-core/pkg/log"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/yunikorn-userinfo/userinfo/policy/queues"
)

// TestConfigValidationMatchesCore: for a corpus of queues.yaml texts (the
// placement generator's, a generator of resources, limits, maxapplications,
// node sorting policies and decoding problems, and written edge cases),
// queues.Validate (what the policy's configValidation runs) must give
// yunikorn-core's LoadSchedulerConfigFromByteArray verdict (what the
// scheduler's /ws/v1/validate-conf runs) and its error text, word for word.
func TestConfigValidationMatchesCore(t *testing.T) {
	cfg := zap.NewProductionConfig()
	corelog.InitializeLogger(zap.NewNop(), &cfg)
	seed := uint64(20261126)
	if s := os.Getenv("DIFFERENTIAL_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = v
	}
	placementN, limitsN := 1500, 2500
	if testing.Short() {
		placementN, limitsN = 150, 250
	}
	g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x85ebca6b))}
	var corpus []string
	for range placementN {
		corpus = append(corpus, g.config())
	}
	for range limitsN {
		corpus = append(corpus, g.limitsConfig())
	}
	corpus = append(corpus, validationEdgeCases...)
	// YAML syntax errors: generated texts broken as typos break them. The
	// module checks the syntax itself before yaml.v3 (whose parse errors
	// are panics, and so traps in the module); the message must stay core's.
	brokenN := 1000
	if testing.Short() {
		brokenN = 100
	}
	for range brokenN {
		corpus = append(corpus, g.breakSyntax(g.config()))
	}

	var agree, accepted, refused, either int
	var disagreements []string
	refusals := map[string]int{}
	for i, text := range corpus {
		coreMsg := coreValidate(text)
		ourMsg := ""
		if err := queues.Validate([]byte(text)); err != nil {
			ourMsg = err.Error()
		}
		if coreMsg != ourMsg && ourMsg != "" && coreCanSay(text, ourMsg) {
			// Two problems in one Go map (two bad quantities of a queue,
			// two negative weights): core meets them in the map's random
			// order, so either message is core's; ours takes the keys in
			// sorted order.
			either++
			agree++
			refused++
			continue
		}
		if coreMsg != ourMsg {
			disagreements = append(disagreements, fmt.Sprintf("config %d:\n  core: %q\n  ours: %q\n%s", i, coreMsg, ourMsg, text))
			continue
		}
		agree++
		if coreMsg == "" {
			accepted++
		} else {
			refused++
			refusals[validationCategory(coreMsg)]++
		}
	}
	t.Logf("seed %d: %d configurations, %d agree (%d accepted, %d refused with the same message, %d of them one of two messages core "+
		"chooses between at random), %d disagreements", seed, len(corpus), agree, accepted, refused, either, len(disagreements))
	for k, v := range refusals {
		t.Logf("  %5d  refused: %s", v, k)
	}
	for _, d := range disagreements[:min(10, len(disagreements))] {
		t.Log(d)
	}
	assert.Empty(t, disagreements, "%d disagreements with yunikorn-core", len(disagreements))
	// The short corpus keeps every fixed edge case (mostly refused) beside a
	// tenth of the generated ones, so its share of accepted texts is lower.
	share := 5
	if testing.Short() {
		share = 6
	}
	assert.Greater(t, refused, len(corpus)/share, "the corpus has configurations the scheduler refuses")
	assert.Greater(t, accepted, len(corpus)/share, "the corpus has configurations the scheduler accepts")
	assert.Greater(t, len(refusals), 40, "the corpus reaches many of core's refusals")
}

// coreValidate is the scheduler's /ws/v1/validate-conf: "" when it allows
// the text, else its reason.
func coreValidate(text string) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprintf("core panicked: %v", r)
		}
	}()
	if _, err := configs.LoadSchedulerConfigFromByteArray([]byte(text)); err != nil {
		return err.Error()
	}
	return ""
}

var variable = regexp.MustCompile(`map\[[^\]]*\]|\{[^}]*\}|'[^']*'|\([^)]*\)|\S*\d\S*`)

// validationCategory shortens a refusal to its kind, for the summary.
func validationCategory(msg string) string {
	msg = strings.ReplaceAll(strings.TrimPrefix(msg, "yaml: unmarshal errors:\n  "), "\n  ", " / ")
	msg = variable.ReplaceAllString(msg, "…")
	if len(msg) > 100 {
		msg = msg[:100]
	}
	return msg
}

// coreCanSay reports whether core, run again, ever refuses text with msg.
func coreCanSay(text, msg string) bool {
	for range 64 {
		if coreValidate(text) == msg {
			return true
		}
	}
	return false
}

var (
	quantities    = []string{"1", "10", "100", "1000", "1G", "2G", "512Mi", "1Gi", "500m", "2", "0", "10k", "1E", "9E"}
	badQuantities = []string{"1.5", "-1", "ten", "1X", "1 Gi", "1mi", "99999999999999999999", "", "1K"}
	resNames      = []string{"memory", "vcore", "vcore", "memory", "nvidia.com/gpu", "pods"}
	limitUsers    = []string{"alice", "bob", "*", "carol", "john.doe", "alice", "bad user", "sa$"}
	limitGroups   = []string{"dev", "ops", "*", "analysts", "dev", "bad/group"}
	sortPolicies  = []string{"fair", "binpacking", "", "fair", "Fair", "spread"}
)

// limitsConfig writes one queues.yaml around what placement does not
// read: queue resources and maxapplications, limits (queue and
// partition), the node sorting policy, and now and then a value of the
// wrong type, an unknown key or two problems at once.
func (g *gen) limitsConfig() string {
	var b strings.Builder
	b.WriteString("partitions:\n  - name: default\n")
	if g.chance(0.15) {
		b.WriteString("    nodesortpolicy:\n")
		fmt.Fprintf(&b, "      type: %q\n", g.pick(sortPolicies))
		if g.chance(0.5) {
			fmt.Fprintf(&b, "      resourceweights: {vcore: %s, memory: %s}\n",
				g.pick([]string{"1", "1.5", "-1", "0", "x"}), g.pick([]string{"1", "2.0", "-0.5"}))
		}
	}
	if g.chance(0.1) {
		b.WriteString("    limits:\n")
		g.limits(&b, "      ", 0)
	}
	if g.chance(0.05) {
		b.WriteString("    preemption: {enabled: " + g.pick([]string{"true", "no", "maybe"}) + "}\n")
	}
	b.WriteString("    queues:\n      - name: root\n")
	if g.chance(0.03) {
		b.WriteString("        resources: {max: {memory: 1G}}\n")
	}
	if g.chance(0.2) {
		b.WriteString("        limits:\n")
		g.limits(&b, "          ", 0)
	}
	if g.chance(0.2) {
		fmt.Fprintf(&b, "        maxapplications: %s\n", g.pick([]string{"10", "100", "5"}))
	}
	b.WriteString("        queues:\n")
	g.limitQueues(&b, "          ", 1)
	return b.String()
}

func (g *gen) limitQueues(b *strings.Builder, indent string, depth int) {
	for i := range 1 + g.r.IntN(3) {
		fmt.Fprintf(b, "%s- name: q%d%d\n", indent, depth, i)
		inner := indent + "  "
		if g.chance(0.5) {
			fmt.Fprintf(b, "%sresources:\n", inner)
			if g.chance(0.6) {
				fmt.Fprintf(b, "%s  guaranteed: {%s}\n", inner, g.resources())
			}
			if g.chance(0.6) {
				fmt.Fprintf(b, "%s  max: {%s}\n", inner, g.resources())
			}
		}
		if g.chance(0.3) {
			fmt.Fprintf(b, "%smaxapplications: %s\n", inner, g.pick([]string{"1", "5", "10", "20", "0", "-1", "2.0", "lots"}))
		}
		if g.chance(0.25) {
			fmt.Fprintf(b, "%slimits:\n", inner)
			g.limits(b, inner+"  ", depth)
		}
		if g.chance(0.02) {
			fmt.Fprintf(b, "%smaxApplications: 3\n", inner) // unknown key
		}
		if g.chance(0.05) {
			fmt.Fprintf(b, "%sproperties: {application.sort.policy: fifo, x: %s}\n", inner, g.pick([]string{"1", "[a]", "{b: c}"}))
		}
		if g.chance(0.03) {
			fmt.Fprintf(b, "%schildtemplate: {maxapplications: %s, resources: {max: {memory: 1G}}}\n", inner, g.pick([]string{"1", "x"}))
		}
		if depth < 3 && g.chance(0.4) {
			fmt.Fprintf(b, "%sparent: true\n%squeues:\n", inner, inner)
			g.limitQueues(b, inner+"  ", depth+1)
		}
	}
}

func (g *gen) resources() string {
	var parts []string
	for range 1 + g.r.IntN(2) {
		q := g.pick(quantities)
		if g.chance(0.05) {
			q = g.pick(badQuantities)
		}
		parts = append(parts, fmt.Sprintf("%s: %q", g.pick(resNames), q))
	}
	if len(parts) == 2 && strings.SplitN(parts[0], ":", 2)[0] == strings.SplitN(parts[1], ":", 2)[0] {
		parts = parts[:1]
	}
	return strings.Join(parts, ", ")
}

func (g *gen) limits(b *strings.Builder, indent string, depth int) {
	for i := range 1 + g.r.IntN(3) {
		fmt.Fprintf(b, "%s- limit: l%d%d\n", indent, depth, i)
		inner := indent + "  "
		if g.chance(0.7) {
			fmt.Fprintf(b, "%susers: [%s]\n", inner, g.names(limitUsers))
		}
		if g.chance(0.5) {
			fmt.Fprintf(b, "%sgroups: [%s]\n", inner, g.names(limitGroups))
		}
		if g.chance(0.6) {
			fmt.Fprintf(b, "%smaxresources: {%s}\n", inner, g.resources())
		}
		if g.chance(0.6) {
			fmt.Fprintf(b, "%smaxapplications: %s\n", inner, g.pick([]string{"1", "2", "5", "10", "0", "50"}))
		}
	}
}

func (g *gen) names(pool []string) string {
	n := 1 + g.r.IntN(2)
	var out []string
	for range n {
		out = append(out, fmt.Sprintf("%q", g.pick(pool)))
	}
	return strings.Join(out, ", ")
}

// validationEdgeCases are written by hand: decoding problems (several at
// once, merges, aliases), and each of core's validation messages.
var validationEdgeCases = []string{
	"",
	"# only a comment\n",
	"---\n",
	"partitions: []",
	"partitions: ~",
	"partitions:\n  - name: default\n    queues: [{name: root}]\n---\nnot: [valid",
	"partitions: [{name: default, queues: [{name: root, parent: maybe, maxapplications: x, submitACL: a}]}]",
	"partitions: [{name: default, queues: [{name: root, queues: {name: a}}]}]",
	"partitions: [{name: default, queues: [{name: root, properties: [a]}]}]",
	"partitions: [{name: default, queues: [{name: root, name: again}]}]",
	"partitions: [{name: default, queues: [{name: root, queues: [{name: a, properties: {x: 1, x: 2}}]}]}]",
	"partitions: [{name: default, queues: [{name: root, submitacl: {a: 1, a: 2}}]}]",
	"partitions: [{name: default, queues: [{name: root, maxapplications: averyveryverylongvalue}]}]",
	"partitions: [{name: default, queues: [{name: root, ~: 1}]}]",
	"partitions: [{name: default, queues: [{name: root, [a]: 1}]}]",
	"partitions: [{name: default, queues: [{name: root, {a: b}: 1}]}]",
	"base: &b {name: root}\npartitions: [{name: default, queues: [{<<: *b, submitacl: '*'}]}]",
	"partitions: [{name: default, queues: [{<<: {name: root, bogus: 1}, submitacl: '*'}]}]",
	"partitions: [{name: default, queues: [{<<: [{name: root}, {name: other, parent: x}], submitacl: '*'}]}]",
	"partitions: [{name: default, queues: [{<<: 1, name: root}]}]",
	"partitions: [{name: default, queues: [{<<: [1], name: root}]}]",
	"partitions: &p [{name: default, queues: *p}]",
	"partitions: [{name: default, queues: [&q {name: root, queues: [*q]}]}]",
	"partitions: [{name: default, queues: [{name: root}]}, {name: Default, queues: [{name: root}]}]",
	"partitions: [{name: '', queues: [{name: root}]}, {queues: [{name: root}]}]",
	"partitions: [{name: default, queues: [{name: root, resources: {guaranteed: {}}}]}]",
	"partitions: [{name: default, queues: [{name: root, resources: {max: ~}}]}]",
	"partitions: [{name: default, limits: [{limit: a, users: [alice], maxapplications: 1}], queues: [{name: root, limits: [{limit: a, users: [alice], maxapplications: 1}]}]}]",
	"partitions: [{name: default, limits: [{limit: a, users: [alice], maxapplications: 1}], queues: [{name: root, limits: [{limit: a, users: [alice], maxapplications: 2}]}]}]",
	"partitions: [{name: default, limits: [{limit: a, users: [], groups: [dev], maxapplications: 1}], queues: [{name: root, limits: [{limit: a, groups: [dev], maxapplications: 1}]}]}]",
	"partitions: [{name: default, limits: [{limit: a, users: [alice], maxresources: {}, maxapplications: 1}], queues: [{name: root, limits: [{limit: a, users: [alice], maxapplications: 1}]}]}]",
	"partitions: [{name: default, queues: [{name: root, limits: [{limit: x, maxresources: {memory: 1G}, maxapplications: 3}]}]}]",
	"partitions: [{name: default, queues: [{name: root, limits: [{limit: x, users: [], groups: ~, maxapplications: 3}]}]}]",
	"partitions: [{name: default, queues: [{name: root, limits: [{limit: x, groups: ['*'], maxapplications: 3}]}]}]",
	"partitions: [{name: default, queues: [{name: root, limits: [{limit: x, users: ['*', alice], maxapplications: 3}]}]}]",
	"partitions: [{name: default, queues: [{name: root, limits: [{limit: x, users: [alice], maxresources: {memory: '0'}}]}]}]",
	"partitions: [{name: default, queues: [{name: root, limits: [{limit: x, users: [alice]}]}]}]",
	"partitions: [{name: default, queues: [{name: root, maxapplications: 2, limits: [{limit: x, users: [alice], maxapplications: 3}]}]}]",
	"partitions: [{name: default, queues: [{name: root, queues: [{name: a, resources: {max: {memory: x}}, limits: [{limit: x, users: [alice], maxapplications: 3}]}]}]}]",
	"partitions: [{name: default, queues: [{name: root, queues: [{name: a, resources: {max: {memory: 1}}, limits: [{limit: x, users: [alice], maxresources: {memory: 2}}]}]}]}]",
	"partitions: [{name: default, queues: [{name: root, queues: [{name: a, resources: {guaranteed: {memory: 2}, max: {memory: 1}}}]}]}]",
	"partitions: [{name: default, queues: [{name: root, queues: [{name: a, resources: {max: {memory: 1}}, queues: [{name: b, resources: {max: {memory: 2}}}]}]}]}]",
	"partitions: [{name: default, queues: [{name: root, queues: [{name: a, resources: {guaranteed: {memory: 1}}, queues: [{name: b, resources: {guaranteed: {memory: 2}}}]}]}]}]",
	"partitions: [{name: default, queues: [{name: root, queues: [{name: a, resources: {max: {memory: 3}}, queues: [{name: b, resources: {guaranteed: {memory: 2}}}, {name: c, resources: {guaranteed: {memory: 2}}}]}]}]}]",
	"partitions: [{name: default, queues: [{name: root, queues: [{name: a, resources: {guaranteed: {vcore: 9E, memory: 8E}}}, {name: b, resources: {guaranteed: {memory: 8E}}}]}]}]",
	"partitions: [{name: default, queues: [{name: root, queues: [{name: a, resources: {max: {vcore: 10E}}}]}]}]",
	"partitions: [{name: default, queues: [{name: root, queues: [{name: a, resources: {max: {vcore: '500m', memory: '1 Gi', pods: ' 3 '}}}]}]}]",
	"partitions: [{name: default, queues: [{name: root, queues: [{name: a, resources: {max: {memory: 500m}}}]}]}]",
	"partitions: [{name: default, nodesortpolicy: {type: binpacking, resourceweights: {vcore: -1, memory: -2}}, queues: [{name: root}]}]",
	"partitions: [{name: default, nodesortpolicy: {type: spread}, queues: [{name: root}]}]",
	"partitions: [{name: default, queues: [{name: root, maxapplications: 5, queues: [{name: a, maxapplications: 6}]}]}]",
	"partitions: [{name: default, queues: [{name: root, maxapplications: 5, queues: [{name: a}]}]}]",
	"partitions: [{name: default, queues: [{name: root, limits: [{limit: p, users: [alice], maxresources: {memory: 5}}], queues: [{name: a, limits: [{limit: c, users: [alice], maxresources: {memory: 6}}]}]}]}]",
	"partitions: [{name: default, queues: [{name: root, limits: [{limit: p, users: ['*'], maxresources: {memory: 5}}], queues: [{name: a, limits: [{limit: c, users: [bob], maxresources: {memory: 6}}]}]}]}]",
	"partitions: [{name: default, queues: [{name: root, limits: [{limit: p, groups: [dev, '*'], maxresources: {memory: 5}}], queues: [{name: a, limits: [{limit: c, groups: [ops], maxresources: {memory: 6}}]}]}]}]",
	"partitions: [{name: default, queues: [{name: root, limits: [{limit: p, users: [alice], maxapplications: 5}], queues: [{name: a, limits: [{limit: c, users: [alice], maxapplications: 6}]}]}]}]",
	"partitions: [{name: default, queues: [{name: root, limits: [{limit: p, users: ['*'], maxapplications: 5}], queues: [{name: a, limits: [{limit: c, users: [bob], maxresources: {memory: 1}}]}]}]}]",
	"partitions: [{name: default, queues: [{name: root, limits: [{limit: p, groups: [dev], maxapplications: 5}], queues: [{name: a, limits: [{limit: c, groups: [dev], maxapplications: 6}]}]}]}]",
	"partitions: [{name: default, queues: [{name: root}], placementrules: [{name: fixed, value: root.a, parent: {name: fixed, value: root.b}}, {name: fixed, value: nope}]}]",
	"partitions: [{name: default, queues: [{name: root}], placementrules: [{name: fixed, value: nope}, {name: user, parent: {name: fixed, value: root.x}, create: true}, {name: fixed, value: x, parent: {name: fixed, value: root.y}}]}]",
	"partitions: [{name: default, queues: [{name: root, submitacl: 'a  b'}]}]",
}

// The built-in configuration that the policy's queue check and the
// audit fall back to is the one yunikorn-core runs without a
// configuration, text for text.
func TestDefaultYAMLMatchesCore(t *testing.T) {
	assert.Equal(t, configs.DefaultSchedulerConfig, queues.DefaultYAML)
}

// breakSyntax makes one typo in a text: a truncation, a stray tab, colon,
// quote, bracket, comma or anchor, a line indented differently.
func (g *gen) breakSyntax(s string) string {
	i := g.r.IntN(len(s) + 1)
	stray := []string{"\t", ":", ": ", "'", "\"", "[", "]", "{", "}", ",", "&a", "*a", "- ", "\n  ", "#", "@"}
	switch g.r.IntN(4) {
	case 0:
		return s[:i]
	case 1:
		return s[:i] + g.pick(stray) + s[i:]
	case 2:
		return s[:i] + g.pick(stray) + s[min(len(s), i+1):]
	default:
		if j := strings.LastIndexByte(s[:i], '\n'); j >= 0 {
			return s[:j+1] + strings.Repeat(" ", g.r.IntN(5)) + strings.TrimLeft(s[j+1:], " ")
		}
		return s + "\t"
	}
}
