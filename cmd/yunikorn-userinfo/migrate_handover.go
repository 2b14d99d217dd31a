package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/yunikorn-userinfo/userinfo/internal/yunikorn/ykconfig"
)

// handedOver reports whether the conversion found bypassAuth "true",
// YuniKorn's admission controller standing aside.
func handedOver(res *ykconfig.Result) bool {
	for _, n := range res.Notes {
		if n.Status == ykconfig.HandedOver {
			return true
		}
	}
	return false
}

// ownWebhook reports whether a mutating webhook is this policy's: the
// shipped configurations name theirs *.user-info.yunikorn.apache.org,
// Kubewarden's controller names its configuration and webhook after the
// ClusterAdmissionPolicy, yunikorn-user-info.
func ownWebhook(config, webhook string) bool {
	return strings.HasSuffix(webhook, ".user-info.yunikorn.apache.org") ||
		strings.Contains(config, "yunikorn-user-info") || strings.Contains(webhook, "yunikorn-user-info")
}

// reportHandOver says, on stderr, whom YuniKorn's admission controller
// handed over to when the ConfigMaps have bypassAuth "true": the
// registrations of this policy in the cluster, or that there is none, so
// nothing checks user.info now. A failed list is a line of the report.
func (a *app) reportHandOver(ctx context.Context, cs kubernetes.Interface, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	l, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(a.stderr, "migrate: hand-over: could not list the mutating webhook configurations to see which enforces: %v\n", err)
		return
	}
	var ours []string
	for _, c := range l.Items {
		for _, w := range c.Webhooks {
			if ownWebhook(c.Name, w.Name) {
				ours = append(ours, c.Name)
				break
			}
		}
	}
	sort.Strings(ours)
	if len(ours) == 0 {
		fmt.Fprintf(a.stderr, "migrate: hand-over: bypassAuth is \"true\" and no webhook configuration of this policy is registered: "+
			"nothing checks user.info on this cluster now. Install the policy with these settings (bypassAuth left out)\n")
		return
	}
	fmt.Fprintf(a.stderr, "migrate: hand-over: YuniKorn's admission controller stands aside (bypassAuth \"true\") for this policy's %s: "+
		"these settings are what it must enforce, not bypassAuth\n", strings.Join(ours, ", "))
}
