package yunikorn

import (
	"fmt"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/apache/yunikorn-k8shim/pkg/common/utils"
)

// ownershipCase is one of the review's cases, scripted against the shim
// and the core.
type ownershipCase struct {
	name   string
	unique bool // generateUniqueAppIds, in the shim and the policy
	run    func(c *coreSim)
}

const longNS = "llllllllllllllllllllllllllllllllllllllllllllllllllllllllll-long" // 63 characters

var ownershipCases = []ownershipCase{
	{"bound relabel label", false, func(c *coreSim) { c.boundRelabel(func(p *v1.Pod) { p.Labels["applicationId"] = "etl" }) }},
	{"bound relabel annotation", false, func(c *coreSim) {
		c.boundRelabel(func(p *v1.Pod) { p.Annotations["yunikorn.apache.org/app-id"] = "etl" })
	}},
	{"per-Pod unique ID", true, func(c *coreSim) {
		alice := c.mustCreate("alice", "team-a", nil, false)
		id := c.appID(alice)
		if !strings.HasSuffix(id, string(alice.UID)) {
			c.t.Fatalf("alice's Pod is in application %s, not one of its own", id)
		}
		c.waitCoreUser(id, "alice")
		// The resolved ID, as a label, from another namespace; and as
		// <prefix>-uniqueautogen, which resolves to bob's own uid.
		c.mustRefuse("bob", "team-b", map[string]string{"applicationId": id}, false)
		own := c.mustCreate("bob", "team-b", map[string]string{"applicationId": "team-a-uniqueautogen"}, false)
		c.waitCoreUser(c.appID(own), "bob")
	}},
	{"completing window", false, func(c *coreSim) {
		alice := c.mustCreate("alice", "team-a", map[string]string{"applicationId": "etl"}, false)
		c.waitCoreUser("etl", "alice")
		c.bindAll()
		c.finishPod(c.current(alice))
		c.waitCoreState("etl", "Completing")
		c.mustRefuse("bob", "team-b", map[string]string{"applicationId": "etl"}, false)
		c.waitCoreGone("etl")
		bob := c.mustCreate("bob", "team-b", map[string]string{"applicationId": "etl"}, false)
		c.waitCoreUser(c.appID(bob), "bob")
	}},
	{"deleted within the completing window", false, func(c *coreSim) {
		alice := c.mustCreate("alice", "team-a", map[string]string{"applicationId": "etl"}, false)
		c.waitCoreUser("etl", "alice")
		c.deletePod(c.current(alice))
		c.waitCoreState("etl", "Completing")
		// The list the policy reads (run --context-dir, Kubewarden's list
		// calls) has no deleted Pod: bob's Pod is admitted and the core
		// puts it in alice's completing application. serve's application
		// index keeps deleted Pods for completingTimeout; this path cannot.
		pod, admitted := c.createPod("bob", "team-b", map[string]string{"applicationId": "etl"}, false)
		if !admitted {
			c.t.Logf("the list path refused bob's Pod within the window: the known gap is closed (%s)", c.lastMsg)
			return
		}
		c.check()
		if c.gaps != 1 {
			c.t.Errorf("want bob's Pod %s in alice's completing application (the list path's known gap), got %d such joins", pod.Name, c.gaps)
		}
		c.t.Logf("known gap of the list path, as documented: a Pod deleted within completingTimeout owns nothing for the policy")
	}},
	{"squatting by a gated Pod", false, func(c *coreSim) {
		c.mustCreate("bob", "team-b", map[string]string{"applicationId": "yunikorn-team-a-autogen"}, true)
		alice := c.mustCreate("alice", "team-a", nil, false)
		if id := c.appID(alice); id != "yunikorn-team-a-autogen" {
			c.t.Fatalf("alice's Pod is in %s", id)
		}
		c.waitCoreUser("yunikorn-team-a-autogen", "alice")
		// Un-gating the squatter would now join alice's application.
		for _, p := range c.pods {
			if len(p.Spec.SchedulingGates) > 0 {
				pod := p.DeepCopy()
				pod.Spec.SchedulingGates = nil
				if c.update(p, pod, "ungate") != nil {
					c.t.Errorf("bob's Pod was un-gated into alice's application")
				}
			}
		}
	}},
	{"cut generated ID", false, func(c *coreSim) {
		alice := c.mustCreate("alice", longNS, nil, false)
		id := c.appID(alice)
		if len(id) != 63 || strings.HasSuffix(id, "-autogen") {
			c.t.Fatalf("want the generated ID cut at 63 bytes, got %q", id)
		}
		c.waitCoreUser(id, "alice")
		c.mustRefuse("bob", "team-b", map[string]string{"applicationId": id}, false)
		c.mustRefuse("bob", "team-b", map[string]string{"yunikorn.apache.org/app-id": id}, false)
	}},
}

// boundRelabel: alice runs etl; bob's bound Pod of his own application
// is relabelled by set to etl: refused, and bob's Pod stays in his.
func (c *coreSim) boundRelabel(set func(*v1.Pod)) {
	c.mustCreate("alice", "team-a", map[string]string{"applicationId": "etl"}, false)
	c.waitCoreUser("etl", "alice")
	bob := c.mustCreate("bob", "team-b", map[string]string{"applicationId": "bobs"}, false)
	c.waitCoreUser("bobs", "bob")
	c.waitBound(bob)
	bob = c.current(bob)
	if bob.Spec.NodeName == "" {
		c.t.Fatalf("bob's Pod is not bound")
	}
	pod := bob.DeepCopy()
	delete(pod.Labels, "applicationId")
	set(pod)
	if c.update(bob, pod, "relabel") != nil {
		c.check()
		c.t.Fatalf("bob's bound Pod was relabelled into alice's application")
	}
	c.checkDisclosure("alice", "team-a")
	c.check()
}

// createPod asks the policy for a Pod CREATE; when admitted the Pod exists
// and the shim has it.
func (c *coreSim) createPod(user, ns string, labels map[string]string, gated bool) (*v1.Pod, bool) {
	c.tick()
	c.uids++
	pod := &v1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", user, c.uids), Namespace: ns,
			Labels: map[string]string{"app": "x"}, Annotations: map[string]string{}},
		Spec: v1.PodSpec{SchedulerName: "yunikorn", Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
	for k, v := range labels {
		if k == "yunikorn.apache.org/app-id" {
			pod.Annotations[k] = v
		} else {
			pod.Labels[k] = v
		}
	}
	if gated {
		pod.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/hold"}}
	}
	admitted, out := c.admit(user, admissionv1.Create, nil, pod)
	if !admitted {
		return nil, false
	}
	out.UID = types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012d", c.uids*7919, c.uids))
	out.Status.Phase = v1.PodPending
	c.pods = append(c.pods, out)
	c.users[out.UID] = recordedUser(out)
	c.event("create %s/%s by %s: %s", ns, out.Name, user, describeIDs(out))
	c.shim.AddPod(out)
	c.check()
	return out, true
}

func (c *coreSim) mustCreate(user, ns string, labels map[string]string, gated bool) *v1.Pod {
	c.t.Helper()
	p, ok := c.createPod(user, ns, labels, gated)
	if !ok {
		c.t.Fatalf("%s's Pod in %s with %v was refused: %s", user, ns, labels, c.lastMsg)
	}
	return p
}

// mustRefuse creates a Pod that must be refused, and checks the refusal
// names neither the owner nor their namespace.
func (c *coreSim) mustRefuse(user, ns string, labels map[string]string, gated bool) {
	c.t.Helper()
	if p, ok := c.createPod(user, ns, labels, gated); ok {
		c.t.Fatalf("%s's Pod %s in %s with %v was admitted into another user's application", user, p.Name, ns, labels)
	}
	c.checkDisclosure("alice", "team-a")
}

// checkDisclosure: the last refusal names no other user nor their Pods'
// namespace.
func (c *coreSim) checkDisclosure(owner, ns string) {
	c.t.Helper()
	if !strings.Contains(c.lastMsg, "owned by another user") {
		c.t.Errorf("want a refusal saying the application is owned by another user, got %q", c.lastMsg)
	}
	for _, secret := range []string{`user ` + owner, owner + "-", `"` + owner + `"`, ns + "/"} {
		if strings.Contains(c.lastMsg, secret) {
			c.t.Errorf("the refusal discloses %q: %s", secret, c.lastMsg)
		}
	}
}

// current is p as the API server has it now.
func (c *coreSim) current(p *v1.Pod) *v1.Pod {
	for _, q := range c.pods {
		if q.UID == p.UID {
			return q
		}
	}
	c.t.Fatalf("pod %s is gone", p.Name)
	return nil
}

func (c *coreSim) waitBound(p *v1.Pod) {
	c.t.Helper()
	if err := utils.WaitForCondition(func() bool {
		c.bindAll()
		return c.current(p).Spec.NodeName != ""
	}, 20*time.Millisecond, 10*time.Second); err != nil {
		c.t.Fatalf("the scheduler did not bind %s: %v", p.Name, err)
	}
}

// waitCoreUser waits until the core has application id, of user.
func (c *coreSim) waitCoreUser(id, user string) {
	c.t.Helper()
	if err := utils.WaitForCondition(func() bool {
		app := c.y.coreApp(id)
		return app != nil && app.GetUser().User == user
	}, 10*time.Millisecond, 10*time.Second); err != nil {
		got := "none"
		if app := c.y.coreApp(id); app != nil {
			got = app.GetUser().User
		}
		c.t.Fatalf("the core has no application %s of user %s (its user: %s)", id, user, got)
	}
}

func (c *coreSim) waitCoreState(id, state string) {
	c.t.Helper()
	if err := utils.WaitForCondition(func() bool {
		app := c.y.coreApp(id)
		return app != nil && app.CurrentState() == state
	}, 10*time.Millisecond, 10*time.Second); err != nil {
		c.t.Fatalf("the core's application %s is not %s", id, state)
	}
}

// waitCoreGone waits until the core has completed id (its own
// completingTimeout) and the shim dropped it, then past the policy's
// window too.
func (c *coreSim) waitCoreGone(id string) {
	c.t.Helper()
	if err := utils.WaitForCondition(func() bool {
		return c.y.coreApp(id) == nil && c.y.ctx.GetApplication(id) == nil
	}, 10*time.Millisecond, 2*coreWindow+10*time.Second); err != nil {
		c.t.Fatalf("the core kept application %s", id)
	}
	time.Sleep(policyMargin + time.Second)
}
