package scenarios

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
	"github.com/yunikorn-userinfo/userinfo/e2e/internal/kbuild"
)

// The YuniKorn scheduler of the suite: its identity, namespace, node and
// queue configuration.
const (
	schedulerUser      = "yunikorn"
	schedulerNamespace = "yunikorn"
	schedulerName      = "yunikorn" // spec.schedulerName of the Pods it schedules
	yunikornNode       = "yk-node-1"
	// appIDLabel names a Pod's YuniKorn application. Without it every Pod of
	// a namespace joins one application, owned by its first Pod's user.
	appIDLabel = "applicationId"
)

// queuesYAML is the yunikorn-configs queue configuration. Placement: the
// queue a Pod names, if it exists (provided); members of the group analysts
// in root.analytics (fixed, with a group filter); members of ops in a queue
// named after the Pod's namespace (tag, with a group filter); everyone else
// in a queue of their own (user). Only members of the test users' groups may submit
// under root (so dave, a contractor, may not; names with ':' or '.' never
// match a YuniKorn ACL, hence groups rather than system:authenticated);
// root.analytics admits analysts, and ops administer it; root.shared also
// admits the user nobody. alice has a
// per-user limit, which makes YuniKorn report her usage against it.
const queuesYAML = `partitions:
  - name: default
    placementrules:
      - name: provided
        create: false
      - name: fixed
        value: root.analytics
        filter:
          type: allow
          groups: [analysts]
      - name: tag
        value: namespace
        create: true
        filter:
          type: allow
          groups: [ops]
      - name: user
        create: true
    queues:
      - name: root
        submitacl: " dev,ops,analysts,frontends"
        limits:
          - limit: alice
            users: [alice]
            maxapplications: 100
            maxresources: {pods: 100}
        queues:
          - name: shared
            # nobody: Pods that record no user (made before anything
            # recorded user.info) may run here, as on a cluster whose
            # default queue admits everyone (TestSwitchChargedUser).
            submitacl: "nobody"
          - name: analytics
            submitacl: " analysts"
            adminacl: " ops"
`

// setUpScheduler gives the scheduler the least RBAC it needs (k8shim's own
// deployment grants the same), its configuration, one schedulable node,
// and starts it.
func (s *suite) setUpScheduler(ctx context.Context, binary string) error {
	cs := s.clients[admin]
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: schedulerNamespace}},
		metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the scheduler namespace: %w", err)
	}
	read := []string{"get", "list", "watch"}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-yunikorn"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps", "namespaces"}, Verbs: read},
			{APIGroups: []string{"scheduling.k8s.io"}, Resources: []string{"priorityclasses"}, Verbs: read},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "create", "patch", "update", "delete"}},
		},
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the scheduler's role: %w", err)
	}
	for _, r := range []string{"system:kube-scheduler", "system:volume-scheduler", role.Name} {
		b := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-yunikorn-" + strings.ReplaceAll(r, ":", "-")},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: schedulerUser}},
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("bind the scheduler to %s: %w", r, err)
		}
	}
	if _, err := cs.CoreV1().ConfigMaps(schedulerNamespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "yunikorn-configs"},
		Data:       map[string]string{"queues.yaml": queuesYAML},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create yunikorn-configs: %w", err)
	}
	if err := createNode(ctx, cs, yunikornNode); err != nil {
		return err
	}
	var err error
	s.scheduler, err = s.cluster.StartScheduler(ctx, cluster.SchedulerOptions{
		Binary: binary, User: schedulerUser, Namespace: schedulerNamespace, RESTAddrEnv: kbuild.RESTAddrEnv,
	})
	return err
}

// createNode registers a Node through the API, as a kubelet would, with
// room for the suite's Pods and a Ready condition. No kubelet runs: binding
// is what the scenarios check. The node-lifecycle controller does not run
// either, so the not-ready taint that admission puts on every new Node is
// removed here.
func createNode(ctx context.Context, cs kubernetes.Interface, name string) error {
	nodes := cs.CoreV1().Nodes()
	n, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	room := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("16"),
		corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	n.Status.Capacity, n.Status.Allocatable = room, room
	n.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}
	if n, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("make node %s ready: %w", name, err)
	}
	n.Spec.Taints = nil
	if _, err := nodes.Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("untaint node %s: %w", name, err)
	}
	return nil
}
