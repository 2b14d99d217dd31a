package yunikorn

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/apache/yunikorn-core/pkg/scheduler/objects"
	"github.com/apache/yunikorn-k8shim/pkg/common/utils"
)

// The core's completingTimeout in TestAppOwnershipMatchesYuniKorn, shortened
// (objects.SetCompletingTimeout) so a sequence sees applications complete.
// The policy is given the same completingTimeout: its own margin
// (appowners.FinishMargin) must cover the core's window ending up to a
// second after finishedAt + completingTimeout (the kubelet stamps
// finishedAt in whole seconds before the shim sees the Pod finish, and the
// core's timer starts when the shim has released its allocation).
const coreWindow = 3 * time.Second

// policyMargin is the policy's appowners.FinishMargin, spelled again: this
// module does not import the root module. How long past coreWindow the
// policy still counts a finished or deleted Pod.
const policyMargin = 2 * time.Second

// TestCoreCompletingTimeout checks the window the policy keeps a finished
// Pod's application for by default, and the simulated timer of
// TestAppOwnershipMatchesK8shim, against yunikorn-core's own value.
func TestCoreCompletingTimeout(t *testing.T) {
	if coreDefaultCompletingTimeout != completingTimeout {
		t.Errorf("yunikorn-core v1.9.0 keeps a completed application %s; the tests and the policy's default assume %s",
			coreDefaultCompletingTimeout, completingTimeout)
	}
}

// TestAppOwnershipMatchesYuniKorn is TestAppOwnershipMatchesK8shim with
// yunikorn-core v1.9.0 running in-process behind k8shim's cache.Context
// (startYuniKorn): the core accepts applications, allocates and binds
// their tasks, moves an application to Completing when its last
// allocation goes and removes it (telling the shim, which drops it)
// completingTimeout later, on its own timer and the real clock. The
// assertion is read from the core: every allocation and request of every
// application belongs to a Pod of the application's user. The review's
// cases run first as named scripts, then generated sequences.
func TestAppOwnershipMatchesYuniKorn(t *testing.T) {
	binary := serveBinary(t)
	objects.SetCompletingTimeout(coreWindow)
	t.Cleanup(func() { objects.SetCompletingTimeout(coreDefaultCompletingTimeout) })

	for _, c := range ownershipCases {
		t.Run(c.name, func(t *testing.T) {
			c.run(newCoreSim(t, rand.New(rand.NewPCG(1, 2)), binary, c.unique))
		})
	}

	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("APPOWNER_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("APPOWNER_SEED: %v", err)
		}
	}
	sequences := 2
	if s := os.Getenv("APPOWNER_CORE_SEQUENCES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("APPOWNER_CORE_SEQUENCES: want a positive number, got %q", s)
		}
		sequences = n
	}
	t.Logf("seed %d (APPOWNER_SEED=%d repeats this run), %d sequences", seed, seed, sequences)
	rng := rand.New(rand.NewPCG(seed, 0xc0e))
	var total simStats
	gaps, ran := 0, 0
	for i := range sequences {
		unique := i%2 == 1
		t.Run(fmt.Sprintf("sequence %d unique=%v", i, unique), func(t *testing.T) {
			ran++
			c := newCoreSim(t, rng, binary, unique)
			for range 40 {
				c.step()
			}
			t.Logf("%+v, known gaps %d", c.stats, c.gaps)
			total.add(c.stats)
			gaps += c.gaps
		})
	}
	t.Logf("total: %+v; joins through a Pod deleted within the window (the list path's known gap): %d", total, gaps)
	if ran > 0 && (total.joins == 0 || total.refused == 0 || total.admitted == 0 || total.removed == 0) {
		t.Errorf("the sequences exercised too little: %+v", total)
	}
}

// coreSim is a sequence against the shim and the core: sim's API server,
// users and policy calls, on the real clock.
type coreSim struct {
	*sim
	y       *yunikorn
	deleted map[string][]deletion // by application ID
	seen    map[string]bool       // "app/uid" checked already
	present map[string]bool       // the core's applications at the last check
	gaps    int
}

// deletion is a Pod deleted while YuniKorn may still count it: the list
// the policy reads under Kubewarden no longer has it.
type deletion struct {
	user string
	at   time.Time
}

func newCoreSim(t *testing.T, rng *rand.Rand, binary string, unique bool) *coreSim {
	t.Helper()
	y := startYuniKorn(t, unique)
	s := &sim{t: t, rng: rng, binary: binary, dir: t.TempDir(), unique: unique, shim: y.ctx,
		finished: map[types.UID]time.Duration{}, users: map[types.UID]string{}, tasks: map[appTask]bool{},
		idle: map[string]time.Duration{}, origin: time.Now()}
	s.settings = fmt.Sprintf(`{"applicationOwnership":{"mode":"enforce","generateUniqueAppIds":%v,"completingTimeout":%q}}`,
		unique, coreWindow.String())
	return &coreSim{sim: s, y: y, deleted: map[string][]deletion{}, seen: map[string]bool{}}
}

func (c *coreSim) tick() { c.now = time.Since(c.origin) }

func (c *coreSim) step() {
	c.tick()
	live := []*v1.Pod{}
	for _, p := range c.pods {
		if _, done := c.finished[p.UID]; !done {
			live = append(live, p)
		}
	}
	r := c.rng.Float64()
	switch {
	case len(live) == 0 || r < 0.35:
		c.create()
	case r < 0.5:
		c.relabel(live[c.rng.IntN(len(live))])
	case r < 0.58:
		c.ungate(live)
	case r < 0.68:
		c.bindAll()
	case r < 0.76:
		c.finishPod(live[c.rng.IntN(len(live))])
	case r < 0.84:
		c.deletePod(c.pods[c.rng.IntN(len(c.pods))])
	default:
		d := time.Duration(200+c.rng.IntN(2800)) * time.Millisecond
		c.event("+%s", d)
		time.Sleep(d)
	}
	c.check()
}

// bindAll applies the bindings the scheduler has made (pods/binding).
func (c *coreSim) bindAll() {
	for _, b := range c.y.api.GetBoundPods(true) {
		for _, p := range c.pods {
			if p.Name != b.Pod || p.Spec.NodeName != "" {
				continue
			}
			if _, done := c.finished[p.UID]; done {
				continue
			}
			pod := p.DeepCopy()
			pod.Spec.NodeName = b.Host
			pod.Status.Phase = v1.PodRunning
			c.replace(p, pod)
			c.event("bind %s/%s", pod.Namespace, pod.Name)
			c.shim.UpdatePod(p, pod)
		}
	}
}

func (c *coreSim) finishPod(p *v1.Pod) {
	c.tick()
	c.finish(p)
}

// deletePod deletes p whatever its state: the shim completes its task,
// and its application (if it was the last) completes completingTimeout
// later.
func (c *coreSim) deletePod(p *v1.Pod) {
	c.tick()
	_, done := c.finished[p.UID]
	if len(p.Spec.SchedulingGates) == 0 && (!done || c.now-c.finished[p.UID] < coreWindow+policyMargin) {
		id := c.appID(p)
		c.deleted[id] = append(c.deleted[id], deletion{c.users[p.UID], time.Now()})
	}
	c.pods = slices.DeleteFunc(c.pods, func(q *v1.Pod) bool { return q == p })
	delete(c.finished, p.UID)
	c.event("delete %s/%s", p.Namespace, p.Name)
	c.shim.DeletePod(p)
}

// check waits for the shim and the core to settle, then reads every
// application of the core: each request and allocation must be a Pod of
// the application's user. A join explained only by a Pod deleted within
// the window is the list path's known gap: logged and counted.
func (c *coreSim) check() {
	c.t.Helper()
	c.settle()
	byUID := map[string]*v1.Pod{}
	for _, p := range c.pods {
		byUID[string(p.UID)] = p
	}
	apps := map[string]bool{}
	for _, app := range c.y.partitionContext().GetApplications() {
		id := app.ApplicationID
		apps[id] = true
		owner := app.GetUser().User
		keys := []string{}
		for _, a := range app.GetAllRequests() {
			keys = append(keys, a.GetAllocationKey())
		}
		for _, a := range app.GetAllAllocations() {
			keys = append(keys, a.GetAllocationKey())
		}
		for _, k := range keys {
			p, ok := byUID[k]
			if !ok || c.seen[id+"/"+k] {
				continue
			}
			c.seen[id+"/"+k] = true
			c.stats.joins++
			user := c.users[p.UID]
			if user == owner {
				continue
			}
			if c.deletedWithin(id, owner) {
				c.gaps++
				c.t.Logf("known gap of the list path: pod %s/%s of user %s joined application %s (%s), user %s's, whose Pod was deleted within completingTimeout; the list the policy reads has no deleted Pod (docs/BEHAVIOUR.md §3.5)",
					p.Namespace, p.Name, user, id, app.CurrentState(), owner)
				continue
			}
			c.t.Errorf("the core has pod %s/%s of user %s in application %s (%s), which is user %s's; the events so far:\n%s",
				p.Namespace, p.Name, user, id, app.CurrentState(), owner, strings.Join(c.log, "\n"))
		}
	}
	for key := range c.seen {
		if id, _, _ := strings.Cut(key, "/"); !apps[id] {
			delete(c.seen, key)
		}
	}
	for id := range c.present {
		if !apps[id] {
			c.stats.removed++
			c.event("core: application %s completed and removed", id)
		}
	}
	c.present = apps
	for id := range c.deleted {
		if !apps[id] {
			delete(c.deleted, id)
		}
	}
}

// deletedWithin reports whether a Pod of user was deleted from application
// id less than the core's window ago, and may be what holds it.
func (c *coreSim) deletedWithin(id, user string) bool {
	for _, d := range c.deleted[id] {
		if d.user == user && time.Since(d.at) < coreWindow+policyMargin {
			return true
		}
	}
	return false
}

// settle waits until every Pod the shim should have handed to the core is
// a request or an allocation there, or 2 s.
func (c *coreSim) settle() {
	var waiting *v1.Pod
	err := utils.WaitForCondition(func() bool {
		for _, p := range c.pods {
			waiting = p
			if _, done := c.finished[p.UID]; done || len(p.Spec.SchedulingGates) > 0 {
				continue
			}
			app := c.y.ctx.GetApplication(c.appID(p))
			if app == nil || app.GetTask(string(p.UID)) == nil {
				return false
			}
			if core := c.y.coreApp(c.appID(p)); core == nil || core.GetAllocationAsk(string(p.UID)) == nil {
				return false
			}
		}
		return true
	}, 10*time.Millisecond, 2*time.Second)
	if err != nil {
		c.event("pod %s/%s is no request of the core's after 2 s: %s", waiting.Namespace, waiting.Name, describeIDs(waiting))
	}
}
