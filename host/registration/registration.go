// Package registration reports how the webhook is registered: it reads
// the MutatingWebhookConfiguration and ValidatingWebhookConfiguration the
// webhook answers for and exports the failurePolicy of each of their
// webhooks, so that an alert can fire while one is registered with
// Ignore (fail open), as the chart's first install leaves it until its
// registration gate sets Fail.
package registration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// DefaultInterval is how often the configurations are read.
const DefaultInterval = time.Minute

// maxWebhooks bounds the series of one configuration: a configuration may
// hold any number of webhooks, the metric only this many (the chart's have
// one each).
const maxWebhooks = 16

// The kinds of webhook configuration, as the --watch-registration flag and
// the metric's "kind" label name them.
const (
	KindMutating   = "mutating"
	KindValidating = "validating"
)

// Ref names one webhook configuration.
type Ref struct {
	Kind string // KindMutating or KindValidating
	Name string
}

func (r Ref) String() string { return r.Kind + "/" + r.Name }

// ParseRefs reads "mutating/NAME" and "validating/NAME" entries; flag
// names the flag in errors.
func ParseRefs(flag string, list []string) ([]Ref, error) {
	var out []Ref
	for _, s := range list {
		kind, name, ok := strings.Cut(s, "/")
		switch {
		case !ok || name == "":
			return nil, fmt.Errorf("invalid %s %q: want mutating/NAME or validating/NAME", flag, s)
		case kind != KindMutating && kind != KindValidating:
			return nil, fmt.Errorf("invalid %s %q: the kind must be mutating or validating, got %q", flag, s, kind)
		case strings.Contains(name, "/"):
			return nil, fmt.Errorf("invalid %s %q: a webhook configuration name has no slash", flag, s)
		}
		out = append(out, Ref{Kind: kind, Name: name})
	}
	return out, nil
}

// Watcher reads the configurations every interval and exports
// yunikorn_userinfo_registration_failure_policy.
type Watcher struct {
	client   kubernetes.Interface
	refs     []Ref
	interval time.Duration
	log      *slog.Logger
	policy   *prometheus.GaugeVec
	reads    *prometheus.CounterVec
}

// New returns a Watcher of refs; prefix starts its metric names.
func New(client kubernetes.Interface, refs []Ref, interval time.Duration, log *slog.Logger, prefix string) *Watcher {
	if interval <= 0 {
		interval = DefaultInterval
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{client: client, refs: refs, interval: interval, log: log,
		policy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: prefix + "registration_failure_policy",
			Help: "Always 1: the failurePolicy (Fail or Ignore) of each webhook of the webhook configurations serve was told " +
				"it answers for (--watch-registration), by kind (mutating, validating), configuration and webhook; " +
				"no series for a configuration that does not exist.",
		}, []string{"kind", "configuration", "webhook", "policy"}),
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "registration_reads_total",
			Help: "Reads of the webhook configurations of --watch-registration, by outcome (ok, not_found, error).",
		}, []string{"outcome"}),
	}
	for _, o := range []string{"ok", "not_found", "error"} {
		w.reads.WithLabelValues(o)
	}
	return w
}

// Collectors are the Watcher's metrics.
func (w *Watcher) Collectors() []prometheus.Collector {
	return []prometheus.Collector{w.policy, w.reads}
}

// Run reads the configurations at once and then every interval until ctx
// ends.
func (w *Watcher) Run(ctx context.Context) {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		w.Poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Poll reads every configuration once and updates the metric. A
// configuration that cannot be read keeps its last series (the policy
// registered then is the best knowledge); one that does not exist has
// none.
func (w *Watcher) Poll(ctx context.Context) {
	for _, ref := range w.refs {
		webhooks, err := w.read(ctx, ref)
		switch {
		case apierrors.IsNotFound(err):
			w.reads.WithLabelValues("not_found").Inc()
			w.replace(ref, nil)
		case err != nil:
			w.reads.WithLabelValues("error").Inc()
			w.log.WarnContext(ctx, "cannot read the webhook configuration", "configuration", ref.String(), "error", err)
		default:
			w.reads.WithLabelValues("ok").Inc()
			w.replace(ref, webhooks)
		}
	}
}

// webhook is the name and failurePolicy of one webhook.
type webhook struct{ name, policy string }

func (w *Watcher) read(ctx context.Context, ref Ref) ([]webhook, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out []webhook
	switch ref.Kind {
	case KindMutating:
		c, err := w.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get MutatingWebhookConfiguration %s: %w", ref.Name, err)
		}
		for _, h := range c.Webhooks {
			out = append(out, webhook{h.Name, policyOf(h.FailurePolicy)})
		}
	case KindValidating:
		c, err := w.client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get ValidatingWebhookConfiguration %s: %w", ref.Name, err)
		}
		for _, h := range c.Webhooks {
			out = append(out, webhook{h.Name, policyOf(h.FailurePolicy)})
		}
	default:
		return nil, errors.New("unknown webhook configuration kind " + ref.Kind)
	}
	return out, nil
}

// policyOf is the failurePolicy as the API server applies it: unset is
// Fail (admissionregistration.k8s.io/v1's default); any other value is
// reported as "other", keeping the label values fixed.
func policyOf(p *admissionregistrationv1.FailurePolicyType) string {
	switch {
	case p == nil || *p == admissionregistrationv1.Fail:
		return string(admissionregistrationv1.Fail)
	case *p == admissionregistrationv1.Ignore:
		return string(admissionregistrationv1.Ignore)
	}
	return "other"
}

// replace makes the series of ref those of webhooks.
func (w *Watcher) replace(ref Ref, webhooks []webhook) {
	w.policy.DeletePartialMatch(prometheus.Labels{"kind": ref.Kind, "configuration": ref.Name})
	for i, h := range webhooks {
		if i == maxWebhooks {
			break
		}
		w.policy.WithLabelValues(ref.Kind, ref.Name, h.name, h.policy).Set(1)
	}
}
