package audit

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/yunikorn-userinfo/userinfo/internal/yunikorn/ykconfig"
	"github.com/yunikorn-userinfo/userinfo/policy/queues"
)

// RuleQueue is a Pod whose user may not submit to any queue its
// application would be placed in.
const RuleQueue = "queue-not-allowed"

// QueueConfig says where YuniKorn's queue configuration is.
type QueueConfig struct {
	// Namespace holds the yunikorn-defaults and yunikorn-configs
	// ConfigMaps (default "yunikorn").
	Namespace string
	// PolicyGroup names the key POLICYGROUP.yaml (default "queues").
	PolicyGroup string
	// Partition is the partition Pods go to (default "default").
	Partition string
}

// LoadQueues reads the queue configuration as the scheduler does:
// POLICYGROUP.yaml from yunikorn-configs over yunikorn-defaults, the
// built-in default when neither has it. It returns the partition, and a
// description of where it came from.
func LoadQueues(ctx context.Context, cs kubernetes.Interface, qc QueueConfig) (*queues.Partition, string, error) {
	if qc.Namespace == "" {
		qc.Namespace = "yunikorn"
	}
	if qc.PolicyGroup == "" {
		qc.PolicyGroup = "queues"
	}
	if qc.Partition == "" {
		qc.Partition = "default"
	}
	key := qc.PolicyGroup + ".yaml"
	src, _, err := ykconfig.ReadCluster(ctx, cs, qc.Namespace)
	if err != nil {
		return nil, "", fmt.Errorf("read the queue configuration: %w", err)
	}
	text, from, ok, err := src.Lookup(key)
	if err != nil {
		return nil, "", fmt.Errorf("read the queue configuration: %s/%s: %w", qc.Namespace, from, err)
	}
	if ok {
		from = qc.Namespace + "/" + from + " " + key
	} else {
		from = "YuniKorn's built-in default (no " + key + " in " + qc.Namespace + "/yunikorn-configs or yunikorn-defaults)"
	}
	if strings.TrimSpace(text) == "" {
		text = queues.DefaultYAML
	}
	cfg, err := queues.Parse([]byte(text))
	if err != nil {
		return nil, "", fmt.Errorf("the queue configuration (%s) is not one YuniKorn would load: %w", from, err)
	}
	p := cfg.Partition(qc.Partition)
	if p == nil {
		return nil, "", fmt.Errorf("the queue configuration (%s) has no partition %q", from, qc.Partition)
	}
	return p, from, nil
}

// The queue a Pod asks for, in the shim's order.
const (
	labelQueueCanonical = "yunikorn.apache.org/queue"
	annotationQueue     = "yunikorn.apache.org/queue"
	labelQueue          = "queue"
	annotationParent    = "yunikorn.apache.org/parentqueue"
)

// checkQueue places the Pod's application as YuniKorn would for its user,
// and reports it when no placement rule gives a queue the user may submit
// to. A user whose groups the scheduler resolves on its own host cannot be
// checked and is counted in QueueUnchecked.
func (s *scan) checkQueue(ctx context.Context, res Resource, p *corev1.Pod, id Identity, appID string) {
	part := s.opts.Queues
	app := queues.App{Tags: map[string]string{"namespace": p.Namespace}}
	if part.NeedsTag("namespace.parentqueue") {
		parent, err := s.parentQueue(ctx, p.Namespace)
		if err != nil {
			s.opts.Logger.Debug("audit: namespace not read", "namespace", p.Namespace, "error", err)
			s.report.QueueUnchecked++
			return
		}
		if parent != "" {
			app.Tags["namespace.parentqueue"] = parent
		}
	}
	for _, src := range []map[string]string{{labelQueueCanonical: p.Labels[labelQueueCanonical]}, {annotationQueue: p.Annotations[annotationQueue]}, {labelQueue: p.Labels[labelQueue]}} {
		for _, v := range src {
			if app.Queue == "" && v != "" {
				app.Queue = v
			}
		}
	}
	who := fmt.Sprintf("user %q with groups [%s]", id.User, strings.Join(id.Groups, ","))
	u, known, err := part.Identity(id.User, id.Groups)
	if err != nil {
		s.add(Finding{Rule: RuleQueue, Resource: res, User: id.User, AppID: appID, Message: "YuniKorn rejects " + who + ": " + err.Error()})
		return
	}
	if !known {
		s.report.QueueUnchecked++
		return
	}
	app.User = u
	pl := part.Place(app)
	if pl.Err == nil {
		return
	}
	requested := ""
	if app.Queue != "" {
		requested = fmt.Sprintf("%q", app.Queue)
	}
	msg := "under the current queue configuration, YuniKorn would reject the application of " + who + pl.Explain(requested)
	s.add(Finding{Rule: RuleQueue, Resource: res, User: id.User, AppID: appID, Message: msg})
}

// parentQueue is a namespace's yunikorn.apache.org/parentqueue annotation,
// read once per namespace (namespaces are few next to Pods).
func (s *scan) parentQueue(ctx context.Context, ns string) (string, error) {
	if v, ok := s.parents[ns]; ok {
		return v, nil
	}
	n, err := s.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	s.parents[ns] = n.Annotations[annotationParent]
	return s.parents[ns], nil
}
