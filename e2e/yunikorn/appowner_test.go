package yunikorn

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/apache/yunikorn-k8shim/pkg/cache"
	"github.com/apache/yunikorn-k8shim/pkg/client"
	ykevents "github.com/apache/yunikorn-k8shim/pkg/common/events"
	"github.com/apache/yunikorn-k8shim/pkg/common/utils"
	shimconf "github.com/apache/yunikorn-k8shim/pkg/conf"
	"github.com/apache/yunikorn-k8shim/pkg/dispatcher"
)

// completingTimeout is yunikorn-core v1.9.0's: an application whose last
// task completed is removed this long after (objects.completingTimeout,
// reported to the shim as Completed, which then drops it from its cache).
const completingTimeout = 30 * time.Second

// TestAppOwnershipMatchesK8shim checks the policy's applicationOwnership
// against the YuniKorn shim itself: the same generated sequences of Pod
// events (creates, relabels of pending and bound Pods, scheduling gates
// set and removed, bindings, finishes, deletions of Pods the shim no longer
// counts, and time passing; several
// users and namespaces; IDs explicit in each place the shim reads them,
// generated for a namespace, cut at 63 bytes, per Pod, and the resolved
// per-Pod IDs of other users' Pods) go to k8shim v1.9.0's own
// cache.Context (AddPod, UpdatePod, DeletePod) and, for every event the API
// server admits through webhooks (a CREATE, an UPDATE of the Pod), to
// `yunikorn-userinfo run` with the cluster as it stands at that moment
// (--context-dir). An event the policy refuses does not happen. After each
// event every task the shim has newly added to an application must be a
// Pod of the application's user: the policy must never admit a Pod that
// lands in another user's application.
//
// Only the scheduler core is not run: its part here is the one timer that
// removes an application completingTimeout after its last task completed,
// which the test applies to the shim as the core's Completed update does
// (cache.Context.RemoveApplication), from the task completions the shim
// itself dispatches.
func TestAppOwnershipMatchesK8shim(t *testing.T) {
	binary := serveBinary(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("APPOWNER_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("APPOWNER_SEED: %v", err)
		}
	}
	sequences := 6
	if s := os.Getenv("APPOWNER_SEQUENCES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("APPOWNER_SEQUENCES: want a positive number, got %q", s)
		}
		sequences = n
	}
	t.Logf("seed %d (APPOWNER_SEED=%d repeats this run), %d sequences", seed, seed, sequences)
	rng := rand.New(rand.NewPCG(seed, 0xa990))

	completions := startCompletionRecorder(t)
	var total simStats
	for i := range sequences {
		unique := i%3 == 2
		t.Run(fmt.Sprintf("sequence %d unique=%v", i, unique), func(t *testing.T) {
			s := newSim(t, rng, binary, unique, completions)
			for range 40 {
				s.step()
			}
			t.Logf("%+v", s.stats)
			total.add(s.stats)
		})
	}
	t.Logf("total: %+v", total)
	if total.joins == 0 || total.refused == 0 || total.admitted == 0 {
		t.Errorf("the sequences exercised too little: %+v", total)
	}
}

// appTask names a task of an application.
type appTask struct{ app, task string }

// completionRecorder records the CompleteTask events the shim dispatches
// (Context.notifyTaskComplete), which drive the core's completion timer.
type completionRecorder struct {
	mu    sync.Mutex
	done  map[appTask]bool
	marks map[string]chan struct{}
	n     int
}

// marker is a task event of the test's own, dispatched after the shim's
// to wait until the dispatcher has delivered them.
type marker struct{ id string }

func (m marker) GetApplicationID() string { return m.id }
func (m marker) GetTaskID() string        { return m.id }
func (m marker) GetEvent() string         { return "marker" }
func (m marker) GetArgs() []interface{}   { return nil }

func startCompletionRecorder(t *testing.T) *completionRecorder {
	r := &completionRecorder{done: map[appTask]bool{}, marks: map[string]chan struct{}{}}
	dispatcher.RegisterEventHandler("appowner-test", dispatcher.EventTypeTask, func(obj interface{}) {
		ev, ok := obj.(ykevents.TaskEvent)
		if !ok {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if ch, ok := r.marks[ev.GetApplicationID()]; ok && ev.GetEvent() == "marker" {
			close(ch)
			delete(r.marks, ev.GetApplicationID())
			return
		}
		if ev.GetEvent() == cache.CompleteTask.String() {
			r.done[appTask{ev.GetApplicationID(), ev.GetTaskID()}] = true
		}
	})
	dispatcher.Start()
	t.Cleanup(func() {
		dispatcher.Stop()
		dispatcher.UnregisterEventHandler("appowner-test", dispatcher.EventTypeTask)
	})
	return r
}

// sync waits until every event dispatched so far has been delivered.
func (r *completionRecorder) sync(t *testing.T) {
	r.mu.Lock()
	r.n++
	id := "marker-" + strconv.Itoa(r.n)
	ch := make(chan struct{})
	r.marks[id] = ch
	r.mu.Unlock()
	dispatcher.Dispatch(marker{id})
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the shim's dispatcher delivered no event for 10 s")
	}
}

func (r *completionRecorder) completed(at appTask) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done[at]
}

type simStats struct {
	admitted, refused, joins, removed int
}

func (s *simStats) add(o simStats) {
	s.admitted += o.admitted
	s.refused += o.refused
	s.joins += o.joins
	s.removed += o.removed
}

// sim is one sequence: the API server's Pods, the shim, and a clock.
type sim struct {
	t           *testing.T
	rng         *rand.Rand
	binary      string
	settings    string
	dir         string
	unique      bool
	shim        *cache.Context
	completions *completionRecorder
	now         time.Duration
	pods        []*v1.Pod // in the API server, in creation order
	finished    map[types.UID]time.Duration
	users       map[types.UID]string // the user each admitted Pod records
	tasks       map[appTask]bool     // tasks the shim has, checked
	idle        map[string]time.Duration
	uids        int
	stats       simStats
	log         []string
	// origin is the wall time of t=0 when the clock is real (the core's
	// own timers run): a finished Pod's finish time is then the real one.
	origin  time.Time
	lastMsg string // the last refusal's message
}

var (
	simUsers      = []string{"alice", "bob", "carol"}
	simNamespaces = []string{"team-a", "team-b", "shared", strings.Repeat("l", 58) + "-long"} // 63 characters
	simIDs        = []string{"etl", "batch", "spark-1"}
)

func newSim(t *testing.T, rng *rand.Rand, binary string, unique bool, completions *completionRecorder) *sim {
	t.Helper()
	c := shimconf.GetSchedulerConf().Clone()
	c.GenerateUniqueAppIds = unique
	shimconf.SetSchedulerConf(c)
	shim := cache.NewContext(client.NewMockedAPIProvider(false))
	shim.GetSchedulerCache().UpdateNode(&v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "node-1"},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("1000"), v1.ResourceMemory: resource.MustParse("1000Gi"), v1.ResourcePods: resource.MustParse("10000"),
		}},
	})
	settings := fmt.Sprintf(`{"applicationOwnership":{"mode":"enforce","generateUniqueAppIds":%v}}`, unique)
	return &sim{t: t, rng: rng, binary: binary, settings: settings, dir: t.TempDir(), unique: unique, shim: shim,
		completions: completions, finished: map[types.UID]time.Duration{}, users: map[types.UID]string{},
		tasks: map[appTask]bool{}, idle: map[string]time.Duration{}}
}

func (s *sim) pick(values ...string) string { return values[s.rng.IntN(len(values))] }

// step makes one random event happen (or be refused), then checks the
// shim.
func (s *sim) step() {
	live := []*v1.Pod{}
	for _, p := range s.pods {
		if _, done := s.finished[p.UID]; !done {
			live = append(live, p)
		}
	}
	r := s.rng.Float64()
	switch {
	case len(live) == 0 || r < 0.35:
		s.create()
	case r < 0.5:
		s.relabel(live[s.rng.IntN(len(live))])
	case r < 0.58:
		s.ungate(live)
	case r < 0.68:
		s.bind(live)
	case r < 0.76:
		s.finish(live[s.rng.IntN(len(live))])
	case r < 0.84:
		s.remove()
	default:
		s.advance(time.Duration(1+s.rng.IntN(40)) * time.Second)
	}
	s.check()
}

// appIDLabels sets a random application ID on meta, in one of the places
// the shim reads, or none.
func (s *sim) setAppID(pod *v1.Pod) {
	for _, key := range []string{"yunikorn.apache.org/app-id", "applicationId", "spark-app-selector"} {
		delete(pod.Labels, key)
	}
	delete(pod.Annotations, "yunikorn.apache.org/app-id")
	var id string
	switch s.rng.IntN(8) {
	case 0, 1:
		return // none: the generated application
	case 2:
		id = s.pick(simIDs...) + "-uniqueautogen"
	case 3:
		// another namespace's generated ID, whole or as the shim cuts it
		id = fmt.Sprintf("%.63s", "yunikorn-"+s.pick(simNamespaces...)+"-autogen")
	case 4:
		// the resolved ID of another Pod's application of its own
		others := []string{}
		for _, p := range s.pods {
			if id := s.appID(p); strings.HasSuffix(id, string(p.UID)) {
				others = append(others, id)
			}
		}
		if len(others) == 0 {
			return
		}
		id = s.pick(others...)
	default:
		id = s.pick(simIDs...)
	}
	switch s.rng.IntN(4) {
	case 0:
		pod.Labels["yunikorn.apache.org/app-id"] = id
	case 1:
		pod.Annotations["yunikorn.apache.org/app-id"] = id
	case 2:
		pod.Labels["applicationId"] = id
	default:
		pod.Labels["spark-app-selector"] = id
	}
}

// appID is the application the shim gives pod (k8shim's
// GetApplicationIDFromPod, which it calls on every Pod event).
func (s *sim) appID(pod *v1.Pod) string {
	return utils.GetApplicationIDFromPod(pod)
}

func (s *sim) create() {
	user := s.pick(simUsers...)
	ns := s.pick(simNamespaces...)
	s.uids++
	pod := &v1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", user, s.uids), Namespace: ns,
			Labels: map[string]string{"app": "x"}, Annotations: map[string]string{}},
		Spec: v1.PodSpec{SchedulerName: "yunikorn", Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
	s.setAppID(pod)
	if s.rng.IntN(4) == 0 {
		pod.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/hold"}}
	}
	admitted, out := s.admit(user, admissionv1.Create, nil, pod)
	if !admitted {
		return
	}
	// The API server gives the Pod its uid after the mutating webhooks.
	out.UID = types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012d", s.rng.Uint32(), s.uids))
	out.Status.Phase = v1.PodPending
	s.pods = append(s.pods, out)
	s.users[out.UID] = recordedUser(out)
	s.event("create %s/%s by %s: %s", ns, out.Name, user, describeIDs(out))
	s.shim.AddPod(out)
}

func (s *sim) relabel(old *v1.Pod) {
	pod := old.DeepCopy()
	s.setAppID(pod)
	s.update(old, pod, "relabel")
}

func (s *sim) ungate(live []*v1.Pod) {
	for _, p := range live {
		if len(p.Spec.SchedulingGates) > 0 {
			pod := p.DeepCopy()
			pod.Spec.SchedulingGates = nil
			s.update(p, pod, "ungate")
			return
		}
	}
}

// update sends an UPDATE of old to pod through the policy, as the Pod's
// own user, and hands it to the shim when admitted.
func (s *sim) update(old, pod *v1.Pod, what string) *v1.Pod {
	admitted, out := s.admit(s.users[old.UID], admissionv1.Update, old, pod)
	if !admitted {
		return nil
	}
	s.replace(old, out)
	s.event("%s %s/%s: %s", what, out.Namespace, out.Name, describeIDs(out))
	s.shim.UpdatePod(old, out)
	return out
}

// bind, finish and remove are the scheduler's, the kubelet's and the
// garbage collector's: the policy does not see them (pods/binding and
// pods/status, a DELETE).
func (s *sim) bind(live []*v1.Pod) {
	for _, p := range live {
		if p.Spec.NodeName == "" && len(p.Spec.SchedulingGates) == 0 {
			pod := p.DeepCopy()
			pod.Spec.NodeName = "node-1"
			pod.Status.Phase = v1.PodRunning
			s.replace(p, pod)
			s.event("bind %s/%s", pod.Namespace, pod.Name)
			s.shim.UpdatePod(p, pod)
			return
		}
	}
}

func (s *sim) finish(p *v1.Pod) {
	pod := p.DeepCopy()
	pod.Status.Phase = v1.PodSucceeded
	s.finished[pod.UID] = s.now
	s.replace(p, pod)
	s.event("finish %s/%s", pod.Namespace, pod.Name)
	s.shim.UpdatePod(p, pod)
}

// remove deletes a Pod the shim holds no application for: a gated one, or
// one that finished completingTimeout ago or more. A Pod deleted earlier
// keeps its application completing for that long in YuniKorn, and no list
// shows the policy a deleted Pod: that window is open
// (docs/BEHAVIOUR.md §3.5), so the sequences do not delete such Pods.
func (s *sim) remove() {
	for _, p := range s.pods {
		at, done := s.finished[p.UID]
		if len(p.Spec.SchedulingGates) == 0 && (!done || s.now-at < completingTimeout) {
			continue
		}
		s.pods = slices.DeleteFunc(s.pods, func(q *v1.Pod) bool { return q == p })
		delete(s.finished, p.UID)
		s.event("delete %s/%s", p.Namespace, p.Name)
		s.shim.DeletePod(p)
		return
	}
}

func (s *sim) replace(old, pod *v1.Pod) {
	for i, p := range s.pods {
		if p == old {
			s.pods[i] = pod
		}
	}
}

// advance lets time pass, and removes the applications the core would
// have removed by then: completingTimeout after their last task completed.
func (s *sim) advance(d time.Duration) {
	s.now += d
	s.event("+%s", d)
	for _, app := range s.shim.GetAllApplications() {
		id := app.GetApplicationID()
		if since, idle := s.idle[id]; idle && s.now-since >= completingTimeout {
			s.shim.RemoveApplication(id)
			delete(s.idle, id)
			for at := range s.tasks {
				if at.app == id {
					delete(s.tasks, at)
				}
			}
			s.stats.removed++
			s.event("core: application %s completed and removed", id)
		}
	}
}

// check compares every task the shim has newly added with its
// application's user, and starts (or stops) the completion timer of each
// application as its tasks have all completed (or not).
func (s *sim) check() {
	s.t.Helper()
	s.completions.sync(s.t)
	for _, app := range s.shim.GetAllApplications() {
		id := app.GetApplicationID()
		for _, p := range s.pods {
			at := appTask{id, string(p.UID)}
			if s.tasks[at] || app.GetTask(string(p.UID)) == nil {
				continue
			}
			s.tasks[at] = true
			s.stats.joins++
			if user := s.users[p.UID]; user != app.GetUser() {
				s.t.Errorf("pod %s/%s of user %s is now a task of application %s, which is user %s's; the events so far:\n%s",
					p.Namespace, p.Name, user, id, app.GetUser(), strings.Join(s.log, "\n"))
			}
		}
		idle := true
		for at := range s.tasks {
			if at.app == id && !s.completions.completed(at) {
				idle = false
			}
		}
		if _, was := s.idle[id]; idle && !was {
			s.idle[id] = s.now
		} else if !idle {
			delete(s.idle, id)
		}
	}
}

func (s *sim) event(format string, args ...any) {
	s.log = append(s.log, fmt.Sprintf("  t=%s ", s.now)+fmt.Sprintf(format, args...))
}

// admit asks `yunikorn-userinfo run` about the request, with the cluster
// as it stands; it returns the Pod as admitted (the policy's patch
// applied).
func (s *sim) admit(user string, op admissionv1.Operation, old, pod *v1.Pod) (bool, *v1.Pod) {
	t := s.t
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.dir, "pods.yaml"), s.clusterYAML(), 0o600); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	req := admissionv1.AdmissionRequest{
		UID:       "0d4c3b2a-1111-4222-8333-944455556666",
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Name:      pod.Name,
		Namespace: pod.Namespace,
		Operation: op,
		UserInfo:  authenticationUser(user, "system:authenticated"),
		Object:    runtime.RawExtension{Raw: raw},
	}
	if old != nil {
		if req.OldObject.Raw, err = json.Marshal(old); err != nil {
			t.Fatal(err)
		}
	}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	args := []string{"run"}
	if m := os.Getenv("POLICY_WASM"); m != "" {
		args = append(args, m)
	}
	args = append(args, "--settings-json", s.settings, "--context-dir", s.dir, "-r", "-")
	cmd := exec.CommandContext(ctx, s.binary, args...)
	cmd.Stdin = bytes.NewReader(body)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("run: %v: %s", err, stderr.String())
	}
	var resp admissionv1.AdmissionResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("run answered %s: %v", out, err)
	}
	if len(resp.Warnings) > 0 {
		t.Errorf("the policy warned about %s %s/%s: %q", op, pod.Namespace, pod.Name, resp.Warnings)
	}
	if !resp.Allowed {
		s.stats.refused++
		msg := ""
		if resp.Result != nil {
			msg = resp.Result.Message
		}
		s.lastMsg = msg
		s.event("refused %s %s/%s by %s (%s): %s", op, pod.Namespace, pod.Name, user, describeIDs(pod), msg)
		if !strings.Contains(msg, "is owned by another user") && !strings.Contains(msg, "is already a task of YuniKorn application") {
			t.Errorf("refused for another reason: %s", msg)
		}
		return false, nil
	}
	s.stats.admitted++
	return true, applyResponse(t, pod, &resp)
}

// clusterYAML is the API server's Pods for --context-dir, a finished Pod's
// finish time on the wall clock as far in the past as on the test's, less
// clockSlack: the policy reads the clock a moment later, in another
// process, and must not see a Pod finished longer ago than YuniKorn does.
func (s *sim) clusterYAML() []byte {
	const clockSlack = 10 * time.Second
	var b bytes.Buffer
	wall := time.Now()
	for _, p := range s.pods {
		p := p.DeepCopy()
		if at, ok := s.finished[p.UID]; ok {
			finish := wall.Add(at - s.now + clockSlack)
			if !s.origin.IsZero() {
				finish = s.origin.Add(at) // as the kubelet stamps it: whole seconds
			}
			end := metav1.NewTime(finish.Truncate(time.Second))
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", Image: "busybox",
				State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: end, FinishedAt: end}}}}
		}
		doc, err := json.Marshal(p)
		if err != nil {
			s.t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(doc)
		b.WriteString("\n")
	}
	return b.Bytes()
}

func recordedUser(pod *v1.Pod) string {
	var v struct {
		User string `json:"user"`
	}
	if err := json.Unmarshal([]byte(pod.Annotations[userInfoKey]), &v); err != nil {
		return ""
	}
	return v.User
}

func describeIDs(p *v1.Pod) string {
	ids := []string{}
	for _, k := range []string{"yunikorn.apache.org/app-id", "applicationId", "spark-app-selector"} {
		if v, ok := p.Labels[k]; ok {
			ids = append(ids, "label "+k+"="+v)
		}
	}
	if v, ok := p.Annotations["yunikorn.apache.org/app-id"]; ok {
		ids = append(ids, "annotation app-id="+v)
	}
	if len(p.Spec.SchedulingGates) > 0 {
		ids = append(ids, "gated")
	}
	if p.Spec.NodeName != "" {
		ids = append(ids, "bound")
	}
	return fmt.Sprintf("%v -> %s (uid %s)", ids, utils.GetApplicationIDFromPod(p), p.UID)
}
