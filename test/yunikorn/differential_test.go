// Package yunikorn compares policy/queues with yunikorn-core v1.9.0 on a
// generated corpus of queue configurations, identities and pods: whether
// the scheduler accepts the configuration, how it resolves the identity,
// and where (or whether) it places the application.
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
	"github.com/apache/yunikorn-core/pkg/common/security"
	corelog "github.com/apache/yunikorn-core/pkg/log"
	"github.com/apache/yunikorn-core/pkg/scheduler/objects"
	"github.com/apache/yunikorn-core/pkg/scheduler/placement"
	si "github.com/apache/yunikorn-scheduler-interface/lib/go/si"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/yunikorn-userinfo/userinfo/policy/queues"
)

// coreOutcome is what yunikorn-core decides for one application.
type coreOutcome struct {
	queue string // "" when rejected
	err   string // the rejection, "" when placed
}

// corePartition is the default partition as the scheduler builds it.
type corePartition struct {
	root  *objects.Queue
	rules *placement.AppPlacementManager
}

// coreLoad is core's path from queues.yaml to a running partition:
// ParseAndValidateConfig, then the configured queues. An error is a
// configuration the scheduler refuses.
func coreLoad(text string) (p *corePartition, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("core panicked: %v", r)
		}
	}()
	conf, err := configs.ParseAndValidateConfig([]byte(text))
	if err != nil {
		return nil, err
	}
	var part *configs.PartitionConfig
	for i := range conf.Partitions {
		if conf.Partitions[i].Name == "default" {
			part = &conf.Partitions[i]
		}
	}
	if part == nil {
		return nil, nil
	}
	m := objects.NewAppQueueMapping()
	root, err := objects.NewConfiguredQueue(part.Queues[0], nil, true, m)
	if err != nil {
		return nil, err
	}
	var add func([]configs.QueueConfig, *objects.Queue) error
	add = func(confs []configs.QueueConfig, parent *objects.Queue) error {
		for _, c := range confs {
			q, err := objects.NewConfiguredQueue(c, parent, true, m)
			if err != nil {
				return err
			}
			if err := add(c.Queues, q); err != nil {
				return err
			}
		}
		return nil
	}
	if err := add(part.Queues[0].Queues, root); err != nil {
		return nil, err
	}
	p = &corePartition{root: root}
	p.rules = placement.NewPlacementManager(part.PlacementRules, p.queue, true)
	return p, nil
}

// queue is the partition's getQueueInternal.
func (p *corePartition) queue(name string) *objects.Queue {
	parts := strings.Split(strings.ToLower(name), ".")
	if len(parts) == 0 || parts[0] != "root" {
		return nil
	}
	q := p.root
	for _, part := range parts[1:] {
		if q = q.GetChildQueue(part); q == nil {
			return nil
		}
	}
	return q
}

// place converts the identity and places the application as core does.
func (p *corePartition) place(c appCase) (out coreOutcome) {
	defer func() {
		if r := recover(); r != nil {
			out = coreOutcome{err: fmt.Sprintf("core panicked: %v", r)}
		}
	}()
	ugi := &si.UserGroupInformation{User: c.user, Groups: c.groups}
	if ugi.User == "" {
		return coreOutcome{err: queues.ErrEmptyUser.Error()}
	}
	var ug security.UserGroup
	if len(c.groups) == 0 {
		// The no-resolver path, without core's process-wide cache (which
		// would answer with groups an earlier case gave the same user).
		ug = security.UserGroup{User: c.user, Groups: []string{c.user}}
	} else {
		var err error
		if ug, err = security.GetUserGroupCache(configs.UserGroupResolver{}, nil, nil).ConvertUGI(ugi, false); err != nil {
			return coreOutcome{err: err.Error()}
		}
	}
	app := objects.NewApplication(&si.AddApplicationRequest{
		ApplicationID: "app", QueueName: c.queue, PartitionName: "default", Ugi: ugi, Tags: c.tags,
	}, ug, nil, "rm")
	if err := p.rules.PlaceApplication(app); err != nil {
		return coreOutcome{err: err.Error()}
	}
	return coreOutcome{queue: app.GetQueuePath()}
}

// ours is the same through policy/queues.
func ours(cfg *queues.Config, c appCase) coreOutcome {
	p := cfg.Partition("default")
	u, known, err := p.Identity(c.user, c.groups)
	if err != nil {
		return coreOutcome{err: err.Error()}
	}
	if !known {
		return coreOutcome{err: "unknown groups"}
	}
	pl := p.Place(queues.App{User: u, Queue: c.queue, Tags: c.tags})
	if pl.Err != nil {
		return coreOutcome{err: pl.Err.Error()}
	}
	return coreOutcome{queue: pl.Queue}
}

type appCase struct {
	user   string
	groups []string
	queue  string
	tags   map[string]string
}

func (c appCase) String() string {
	return fmt.Sprintf("user %q groups %q queue %q tags %v", c.user, c.groups, c.queue, c.tags)
}

// knownDivergences are corpus cases where the two differ on purpose; each
// is explained in docs/QUEUES.md ("Where core and this package differ").
func knownDivergence(core, our coreOutcome) bool {
	// core panics on a fixed queue that starts with "root" but is not below
	// it (rootx): the scheduler would crash; the policy reports it.
	return strings.HasPrefix(core.err, "core panicked") && our.err == "queue name is not below root"
}

// TestDifferential_placement generates configurations and applications
// and requires policy/queues to decide as yunikorn-core on every one:
// the configuration accepted or refused, and each application placed in
// the same queue or rejected with the same error.
func TestDifferential_placement(t *testing.T) {
	cfg := zap.NewProductionConfig()
	corelog.InitializeLogger(zap.NewNop(), &cfg)
	seed := uint64(20261123)
	if s := os.Getenv("DIFFERENTIAL_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = v
	}
	configsN, appsN := 2000, 25
	if testing.Short() {
		configsN = 200
	}
	g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	var (
		configsValid, configsInvalid, apps, placed, rejected, divergences, unknown int
		disagreements                                                              []string
	)
	outcomes, refusals := map[string]int{}, map[string]int{}
	for i := range configsN {
		text := g.config()
		corePart, coreErr := coreLoad(text)
		cfg, ourErr := queues.Parse([]byte(text))
		if (coreErr == nil) != (ourErr == nil) {
			disagreements = append(disagreements, fmt.Sprintf("config %d: core error %v, ours %v\n%s", i, coreErr, ourErr, text))
			continue
		}
		if coreErr != nil {
			configsInvalid++
			refusals[category(coreErr.Error())]++
			continue
		}
		if corePart == nil {
			require.Nil(t, cfg.Partition("default"), "config %d has no default partition in core\n%s", i, text)
			continue
		}
		configsValid++
		for range appsN {
			c := g.app()
			our := ours(cfg, c)
			if our.err == "unknown groups" {
				// an os resolver and no groups: core asks the host's user
				// database, which the policy cannot see.
				unknown++
				continue
			}
			core := corePart.place(c)
			apps++
			switch {
			case core == our:
			case knownDivergence(core, our):
				divergences++
				continue
			default:
				disagreements = append(disagreements, fmt.Sprintf("config %d, %s: core %+v, ours %+v\n%s", i, c, core, our, text))
				continue
			}
			if core.err == "" {
				placed++
				outcomes["placed"]++
			} else {
				rejected++
				outcomes[core.err]++
			}
		}
	}
	t.Logf("seed %d: %d configurations (%d accepted, %d refused by the scheduler), %d applications compared (%d placed, %d rejected), "+
		"%d known divergences, %d not comparable (groups from the host's user database)",
		seed, configsN, configsValid, configsInvalid, apps, placed, rejected, divergences, unknown)
	for k, v := range outcomes {
		t.Logf("  %5d  %s", v, k)
	}
	for k, v := range refusals {
		t.Logf("  %5d  configuration refused: %s", v, k)
	}
	if len(disagreements) > 0 {
		for _, d := range disagreements[:min(10, len(disagreements))] {
			t.Log(d)
		}
	}
	assert.Empty(t, disagreements, "%d disagreements with yunikorn-core", len(disagreements))
	assert.Greater(t, placed, apps/10, "the corpus places applications")
	assert.Greater(t, rejected, apps/10, "the corpus rejects applications")
	assert.Greater(t, configsInvalid, configsN/20, "the corpus has configurations the scheduler refuses")
}

var digits = regexp.MustCompile(`#\d+|line \d+|'[^']*'|"[^"]*"|\([^)]*\)|: \S+$`)

// category shortens an error to its kind, for the corpus summary.
func category(msg string) string {
	if len(msg) > 90 {
		msg = msg[:90]
	}
	return digits.ReplaceAllString(msg, "…")
}

// TestDifferential_aliasBomb: a configuration whose aliases nest ten by ten
// nine times is refused by both, for the same reason.
func TestDifferential_aliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("partitions:\n  - name: default\n    queues:\n      - name: root\n        queues:\n          - &q0 {name: a}\n")
	for i := 1; i <= 9; i++ {
		refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*q%d, ", i-1), 10), ", ")
		fmt.Fprintf(&b, "          - &q%d {name: l%d, queues: [%s]}\n", i, i, refs)
	}
	_, coreErr := coreLoad(b.String())
	_, ourErr := queues.Parse([]byte(b.String()))
	require.Error(t, coreErr)
	require.Error(t, ourErr)
	assert.Contains(t, coreErr.Error(), "document contains excessive aliasing")
	assert.Contains(t, ourErr.Error(), "document contains excessive aliasing")
}
