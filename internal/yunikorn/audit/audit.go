// Package audit finds what already runs without a trustworthy identity:
// Pods and workload templates scheduled by YuniKorn whose
// yunikorn.apache.org/user.info annotation is missing or invalid, Pods
// whose value differs from the template of their controller, and
// application IDs whose Pods name different users. It reads the cluster
// page by page and keeps only small per-application aggregates, so its
// memory grows with the findings and the number of applications, not with
// the number of objects.
package audit

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/yunikorn-userinfo/userinfo/policy/nsfilter"
	"github.com/yunikorn-userinfo/userinfo/policy/queues"
	"github.com/yunikorn-userinfo/userinfo/policy/workloads"
)

// The rules a finding can break.
const (
	RuleMissing       = "user-info-missing"
	RuleInvalid       = "user-info-invalid"
	RuleOwnerMismatch = "user-info-owner-mismatch"
	RuleSharedAppID   = "application-id-shared"
)

// Options tune a scan. The zero value scans every namespace for
// YuniKorn's default scheduler name, 500 objects a page.
type Options struct {
	// Namespace limits the scan to one namespace; "" scans all.
	Namespace string
	// SchedulerName is the scheduler whose Pods are audited (default
	// "yunikorn"): Pods of other schedulers never reach YuniKorn.
	SchedulerName string
	// PageSize is the Limit of every list request (default 500).
	PageSize int64
	// UniqueAppIDs mirrors YuniKorn's
	// admissionController.filtering.generateUniqueAppId: Pods without an
	// ID then each get an application of their own.
	UniqueAppIDs bool
	// CompletingTimeout is how long yunikorn-core keeps an application
	// after its last Pod finished (its completingTimeout): a finished Pod
	// counts as its application's for that long after its containers'
	// last finish time, then no more. 0 is YuniKorn's default, 30s; a
	// negative value counts no finished Pod.
	CompletingTimeout time.Duration
	// Now is the clock finished Pods are measured against (default
	// time.Now).
	Now func() time.Time
	// OwnerCacheSize bounds the cache of controller templates (default
	// 1024 entries).
	OwnerCacheSize int
	// Progress, if set, gets a line every ProgressEvery objects (default
	// 5000) and at the end of every kind.
	Progress      io.Writer
	ProgressEvery int
	// Queues, if set, is the partition of YuniKorn's queue configuration
	// (LoadQueues): every Pod with a valid user.info is placed as
	// YuniKorn would place its application, and reported when its user
	// may submit to no queue it could go to.
	Queues *queues.Partition
	// Workloads, if it has kinds, are the custom kinds of the policy's
	// workloads setting: their objects are listed with Dynamic and their
	// templates audited, and Pods and workloads whose controller is one of
	// their owner kinds are compared with it. A kind the API server does
	// not serve is reported in Report.Skipped, not an error.
	Workloads *workloads.Set
	// Dynamic reads the custom kinds; required when Workloads has kinds.
	Dynamic dynamic.Interface
	// Scheduling, if set, is the policy's scheduling setting: Pods and
	// templates of another scheduler in a namespace it processes are
	// audited too (the policy sends such Pods to YuniKorn).
	Scheduling *Scheduling
	// Logger gets debug lines (default: discard).
	Logger *slog.Logger
}

func (o *Options) defaults() {
	if o.SchedulerName == "" {
		o.SchedulerName = "yunikorn"
	}
	if o.PageSize <= 0 {
		o.PageSize = 500
	}
	if o.OwnerCacheSize <= 0 {
		o.OwnerCacheSize = 1024
	}
	if o.CompletingTimeout == 0 {
		o.CompletingTimeout = DefaultCompletingTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 5000
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Resource names one object.
type Resource struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Namespace  string    `json:"namespace"`
	Name       string    `json:"name"`
	UID        types.UID `json:"uid"`
}

// Finding is one object that breaks one rule.
type Finding struct {
	Rule     string   `json:"rule"`
	Resource Resource `json:"resource"`
	// User is the user the object's user.info names, if it names one.
	User string `json:"user,omitempty"`
	// AppID is the YuniKorn application of a Pod.
	AppID string `json:"applicationId,omitempty"`
	// ChargedUser is the user YuniKorn charges the application to
	// (RuleChargedUser only).
	ChargedUser string `json:"chargedUser,omitempty"`
	Message     string `json:"message"`
	// Adopt, on a user-info-missing finding about an object that records
	// no owner and has no controller, is how an adopter records its owner.
	Adopt *Adoption `json:"adopt,omitempty"`
}

// Report is what a scan found.
type Report struct {
	Findings []Finding `json:"findings"`
	// Scanned counts the objects read, by kind; Audited those of them
	// that YuniKorn schedules and so were checked.
	Scanned map[string]int `json:"scanned"`
	Audited map[string]int `json:"audited"`
	// Passed counts, by namespace, the audited objects without a finding.
	Passed map[string]int `json:"passed"`
	// QueueUnchecked counts the Pods the queue check could not judge
	// (groups the scheduler resolves on its host, a namespace not read).
	QueueUnchecked int `json:"queueUnchecked,omitempty"`
	// OwnersUnread counts the Pods whose controller could not be read
	// (an error other than not found, e.g. no get permission): they were
	// not compared with it.
	OwnersUnread int `json:"ownersUnread,omitempty"`
	// AllNamespaces is whether every namespace was read: only then are
	// applications seen whole, and ClusterFindings and CrossNamespaceApps
	// meaningful.
	AllNamespaces bool `json:"allNamespaces"`
	// ClusterFindings are the findings about no one namespace: the
	// applications whose Pods, in several namespaces, name several users.
	ClusterFindings []ClusterFinding `json:"clusterFindings"`
	// CrossNamespaceApps counts the applications with Pods in more than
	// one namespace, whether or not they name several users.
	CrossNamespaceApps int `json:"crossNamespaceApps"`
	// Skipped are the custom kinds of the workloads setting that were not
	// audited (their CRD is not installed, say).
	Skipped []SkippedKind `json:"skipped,omitempty"`
}

// ClusterFinding is an application whose Pods are in several namespaces
// and name several users.
type ClusterFinding struct {
	Rule  string `json:"rule"`
	AppID string `json:"applicationId"`
	// Users are the users its Pods name, the oldest Pod's first (YuniKorn
	// gives the application to the user of its first Pod); at most
	// maxUsersPerApp, MoreUsers counts the others.
	Users     []AppUser `json:"users"`
	MoreUsers int       `json:"moreUsers,omitempty"`
	// Namespaces are the namespaces of the listed users' Pods, sorted.
	Namespaces []string `json:"namespaces"`
	Message    string   `json:"message"`
}

// AppUser is one user of an application.
type AppUser struct {
	User string `json:"user"`
	Pods int    `json:"pods"`
	// Namespaces are where its Pods are (at most maxNamespacesPerUser;
	// MoreNamespaces says there were others).
	Namespaces     []string `json:"namespaces"`
	MoreNamespaces bool     `json:"moreNamespaces,omitempty"`
	// Oldest is its oldest Pod.
	Oldest Resource `json:"oldest"`
}

// SkippedKind is a custom kind that was not audited, and why.
type SkippedKind struct {
	Group   string `json:"group"`
	Version string `json:"version,omitempty"`
	Kind    string `json:"kind"`
	// Entry names the settings entry (a preset, or the kind).
	Entry  string `json:"entry"`
	Reason string `json:"reason"`
}

// Run scans the cluster.
func Run(ctx context.Context, cs kubernetes.Interface, opts Options) (*Report, error) {
	opts.defaults()
	if opts.Workloads != nil && len(opts.Workloads.Kinds) > 0 && opts.Dynamic == nil {
		return nil, fmt.Errorf("audit: custom workload kinds need a dynamic client (Options.Dynamic)")
	}
	s := &scan{
		cs:   cs,
		opts: opts,
		report: &Report{Findings: []Finding{}, Scanned: map[string]int{}, Audited: map[string]int{}, Passed: map[string]int{},
			AllNamespaces: opts.Namespace == "", ClusterFindings: []ClusterFinding{}},
		owners:     newLRU(opts.OwnerCacheSize),
		apps:       map[string]*appUsers{},
		parents:    map[string]string{},
		namespaces: map[string]string{},
		processed:  map[string]bool{},
		gvrs:       map[workloads.KindRef]schema.GroupVersionResource{},
	}
	if err := s.resolveKinds(ctx); err != nil {
		return nil, err
	}
	if err := s.workloads(ctx); err != nil {
		return nil, err
	}
	if err := s.customKinds(ctx); err != nil {
		return nil, err
	}
	if err := s.pods(ctx); err != nil {
		return nil, err
	}
	s.sharedApps()
	sortReport(s.report)
	return s.report, nil
}

// sortReport puts every list of the report in a total order that does not
// depend on the order the API server listed the objects in, so that the
// same cluster gives the same report.
func sortReport(r *Report) {
	sort.Slice(r.Findings, func(i, j int) bool { return findingLess(&r.Findings[i], &r.Findings[j]) })
	sort.Slice(r.ClusterFindings, func(i, j int) bool { return r.ClusterFindings[i].AppID < r.ClusterFindings[j].AppID })
	sort.Slice(r.Skipped, func(i, j int) bool {
		a, b := r.Skipped[i], r.Skipped[j]
		return cmpStrings(a.Group, b.Group, a.Kind, b.Kind, a.Version, b.Version, a.Entry, b.Entry, a.Reason, b.Reason) < 0
	})
}

// findingLess orders findings by namespace, kind, name, then every other
// field, so that no two different findings tie.
func findingLess(a, b *Finding) bool {
	x, y := a.Resource, b.Resource
	return cmpStrings(x.Namespace, y.Namespace, x.Kind, y.Kind, x.Name, y.Name, x.APIVersion, y.APIVersion,
		string(x.UID), string(y.UID), a.Rule, b.Rule, a.AppID, b.AppID, a.User, b.User, a.Message, b.Message) < 0
}

// cmpStrings compares pairs (a0, b0, a1, b1, ...) in turn.
func cmpStrings(pairs ...string) int {
	for i := 0; i+1 < len(pairs); i += 2 {
		if c := strings.Compare(pairs[i], pairs[i+1]); c != 0 {
			return c
		}
	}
	return 0
}

// podOlder is the total order of Pods an application's owner is chosen
// by: creation time (one-second resolution, so ties are common), then
// namespace, name and UID.
func podOlder(at time.Time, a Resource, bt time.Time, b Resource) bool {
	if !at.Equal(bt) {
		return at.Before(bt)
	}
	return cmpStrings(a.Namespace, b.Namespace, a.Name, b.Name, string(a.UID), string(b.UID)) < 0
}

type scan struct {
	cs     kubernetes.Interface
	opts   Options
	report *Report
	owners *lru
	apps   map[string]*appUsers
	// parents caches the namespaces' parentqueue annotations.
	parents map[string]string
	// namespaces interns the namespace names kept per application.
	namespaces map[string]string
	// processed caches, per namespace, whether the scheduling setting
	// processes it.
	processed map[string]bool
	// gvrs are the custom kinds the API server serves, as resolved.
	gvrs map[workloads.KindRef]schema.GroupVersionResource
	// failed marks, per object, that it has a finding (reset per object).
	failed bool
}

// maxUsersPerApp bounds the users a ClusterFinding lists: the first by
// their oldest Pod; more are counted, not listed (every user of a shared
// application is kept while scanning: each but the owner is a finding).
// maxNamespacesPerUser bounds the namespaces kept per user: the first in
// sorted order.
const (
	maxUsersPerApp       = 8
	maxNamespacesPerUser = 4
)

// appUsers is what is kept of one application ID: per user, the number of
// Pods and the oldest, and whether its Pods are in several namespaces.
type appUsers struct {
	users   []appUser
	multiNS bool
}

type appUser struct {
	user    string
	pods    int
	oldest  time.Time
	example Resource
	// passed is whether example had no other finding.
	passed bool
	// other holds the namespaces of its Pods once there are several, nil
	// while they are all in example's (a pointer: most applications have
	// one user in one namespace, and this record is kept per application).
	other *otherNamespaces
}

type otherNamespaces struct {
	// names are the first maxNamespacesPerUser namespaces in sorted
	// order, sorted: the same whatever order the Pods came in.
	names []string
	more  bool
}

// namespacesOf lists the user's namespaces, sorted.
func (u *appUser) namespacesOf() []string {
	if u.other == nil {
		return []string{u.example.Namespace}
	}
	return slices.Clone(u.other.names)
}

// moreNS is whether the user has Pods in more namespaces than are kept.
func (u *appUser) moreNS() bool { return u.other != nil && u.other.more }

// addNS records that the user has a Pod in ns.
func (u *appUser) addNS(ns string) {
	if u.other == nil {
		if ns == u.example.Namespace {
			return
		}
		u.other = &otherNamespaces{names: []string{u.example.Namespace}}
	}
	i, found := slices.BinarySearch(u.other.names, ns)
	if found {
		return
	}
	if len(u.other.names) < maxNamespacesPerUser {
		u.other.names = slices.Insert(u.other.names, i, ns)
		return
	}
	u.other.more = true
	if i < len(u.other.names) {
		// Keep the first names: ns displaces the last.
		u.other.names = slices.Insert(u.other.names[:len(u.other.names)-1], i, ns)
	}
}

func (s *scan) add(f Finding) {
	s.failed = true
	s.report.Findings = append(s.report.Findings, f)
}

// page lists one kind page by page, calling each on every item of a page
// before the next page is requested; nothing of a page is kept.
func page[T any](ctx context.Context, s *scan, kind string, list func(context.Context, metav1.ListOptions) ([]T, metav1.ListMeta, error), each func(*T)) error {
	opts := metav1.ListOptions{Limit: s.opts.PageSize}
	n, pages := 0, 0
	for {
		items, meta, err := list(ctx, opts)
		if err != nil {
			return fmt.Errorf("list %s (page %d): %w", kind, pages+1, err)
		}
		pages++
		for i := range items {
			each(&items[i])
			n++
			if s.opts.Progress != nil && n%s.opts.ProgressEvery == 0 {
				total := ""
				if meta.RemainingItemCount != nil {
					total = fmt.Sprintf(" of about %d", n+(len(items)-1-i)+int(*meta.RemainingItemCount))
				}
				fmt.Fprintf(s.opts.Progress, "audit: %s: %d%s read, %d findings so far\n", kind, n, total, len(s.report.Findings))
			}
		}
		if meta.Continue == "" {
			break
		}
		opts.Continue = meta.Continue
	}
	s.report.Scanned[kind] += n
	if s.opts.Progress != nil {
		fmt.Fprintf(s.opts.Progress, "audit: %s: %d read in %d pages, %d audited, %d findings so far\n", kind, n, pages, s.report.Audited[kind], len(s.report.Findings))
	}
	return nil
}

// checkTemplate checks the user.info of an object's (or a template's)
// metadata and returns the identity it names, ok false when it has none
// worth comparing.
func (s *scan) checkValue(res Resource, annotations map[string]string, where string) (Identity, bool) {
	v, present := annotations[AnnotationKey]
	if !present {
		s.add(Finding{Rule: RuleMissing, Resource: res,
			Message: where + " has no " + AnnotationKey + " annotation: YuniKorn does not know who submitted it"})
		return Identity{}, false
	}
	id, err := ParseUserInfo(v)
	if err != nil {
		s.add(Finding{Rule: RuleInvalid, Resource: res,
			Message: where + " has an invalid " + AnnotationKey + " annotation: " + err.Error()})
		return Identity{}, false
	}
	return id, true
}

func (s *scan) audited(res Resource) {
	s.report.Audited[res.Kind]++
	if !s.failed {
		s.report.Passed[res.Namespace]++
	}
	s.failed = false
}

// workloads checks the Pod templates of the built-in controllers.
func (s *scan) workloads(ctx context.Context) error {
	ns := s.opts.Namespace
	apps, batch, core := s.cs.AppsV1(), s.cs.BatchV1(), s.cs.CoreV1()
	tmpl := func(kind, apiVersion string, meta *metav1.ObjectMeta, t *corev1.PodTemplateSpec, where string) {
		if !s.schedules(ctx, meta.Namespace, t.Spec.SchedulerName, t.Labels[nsfilter.LabelApp]) {
			return
		}
		res := Resource{APIVersion: apiVersion, Kind: kind, Namespace: meta.Namespace, Name: meta.Name, UID: meta.UID}
		what := "the Pod template (" + where + ")"
		id, ok := s.checkValue(res, t.Annotations, what)
		if _, present := t.Annotations[AnnotationKey]; !present {
			s.adoptable(res, meta, meta.Labels, t.Labels)
		}
		// A workload an operator made (a JobSet's Job) records its owner's
		// identity; built-in owners (a Deployment's ReplicaSet) are not
		// compared here.
		if ref := metav1.GetControllerOfNoCopy(meta); ok && ref != nil && s.opts.Workloads.IsOwner(kindRefOf(ref)) {
			s.compareOwner(ctx, res, ref, id, "", what)
		}
		s.audited(res)
	}
	steps := []func() error{
		func() error {
			return page(ctx, s, "Deployment", func(ctx context.Context, o metav1.ListOptions) ([]appsv1.Deployment, metav1.ListMeta, error) {
				l, err := apps.Deployments(ns).List(ctx, o)
				if err != nil {
					return nil, metav1.ListMeta{}, err
				}
				return l.Items, l.ListMeta, nil
			}, func(d *appsv1.Deployment) {
				tmpl("Deployment", "apps/v1", &d.ObjectMeta, &d.Spec.Template, "spec.template")
			})
		},
		func() error {
			return page(ctx, s, "ReplicaSet", func(ctx context.Context, o metav1.ListOptions) ([]appsv1.ReplicaSet, metav1.ListMeta, error) {
				l, err := apps.ReplicaSets(ns).List(ctx, o)
				if err != nil {
					return nil, metav1.ListMeta{}, err
				}
				return l.Items, l.ListMeta, nil
			}, func(d *appsv1.ReplicaSet) {
				tmpl("ReplicaSet", "apps/v1", &d.ObjectMeta, &d.Spec.Template, "spec.template")
			})
		},
		func() error {
			return page(ctx, s, "StatefulSet", func(ctx context.Context, o metav1.ListOptions) ([]appsv1.StatefulSet, metav1.ListMeta, error) {
				l, err := apps.StatefulSets(ns).List(ctx, o)
				if err != nil {
					return nil, metav1.ListMeta{}, err
				}
				return l.Items, l.ListMeta, nil
			}, func(d *appsv1.StatefulSet) {
				tmpl("StatefulSet", "apps/v1", &d.ObjectMeta, &d.Spec.Template, "spec.template")
			})
		},
		func() error {
			return page(ctx, s, "DaemonSet", func(ctx context.Context, o metav1.ListOptions) ([]appsv1.DaemonSet, metav1.ListMeta, error) {
				l, err := apps.DaemonSets(ns).List(ctx, o)
				if err != nil {
					return nil, metav1.ListMeta{}, err
				}
				return l.Items, l.ListMeta, nil
			}, func(d *appsv1.DaemonSet) {
				tmpl("DaemonSet", "apps/v1", &d.ObjectMeta, &d.Spec.Template, "spec.template")
			})
		},
		func() error {
			return page(ctx, s, "Job", func(ctx context.Context, o metav1.ListOptions) ([]batchv1.Job, metav1.ListMeta, error) {
				l, err := batch.Jobs(ns).List(ctx, o)
				if err != nil {
					return nil, metav1.ListMeta{}, err
				}
				return l.Items, l.ListMeta, nil
			}, func(d *batchv1.Job) { tmpl("Job", "batch/v1", &d.ObjectMeta, &d.Spec.Template, "spec.template") })
		},
		func() error {
			return page(ctx, s, "CronJob", func(ctx context.Context, o metav1.ListOptions) ([]batchv1.CronJob, metav1.ListMeta, error) {
				l, err := batch.CronJobs(ns).List(ctx, o)
				if err != nil {
					return nil, metav1.ListMeta{}, err
				}
				return l.Items, l.ListMeta, nil
			}, func(d *batchv1.CronJob) {
				tmpl("CronJob", "batch/v1", &d.ObjectMeta, &d.Spec.JobTemplate.Spec.Template, "spec.jobTemplate.spec.template")
			})
		},
		func() error {
			return page(ctx, s, "ReplicationController", func(ctx context.Context, o metav1.ListOptions) ([]corev1.ReplicationController, metav1.ListMeta, error) {
				l, err := core.ReplicationControllers(ns).List(ctx, o)
				if err != nil {
					return nil, metav1.ListMeta{}, err
				}
				return l.Items, l.ListMeta, nil
			}, func(d *corev1.ReplicationController) {
				if d.Spec.Template != nil {
					tmpl("ReplicationController", "v1", &d.ObjectMeta, d.Spec.Template, "spec.template")
				}
			})
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// pods checks every Pod YuniKorn schedules, against its controller's
// template, and records its application's user.
func (s *scan) pods(ctx context.Context) error {
	return page(ctx, s, "Pod", func(ctx context.Context, o metav1.ListOptions) ([]corev1.Pod, metav1.ListMeta, error) {
		l, err := s.cs.CoreV1().Pods(s.opts.Namespace).List(ctx, o)
		if err != nil {
			return nil, metav1.ListMeta{}, err
		}
		return l.Items, l.ListMeta, nil
	}, func(p *corev1.Pod) {
		if !s.schedules(ctx, p.Namespace, p.Spec.SchedulerName, p.Labels[nsfilter.LabelApp]) {
			return
		}
		res := Resource{APIVersion: "v1", Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID}
		appID := AppID(p.Namespace, string(p.UID), p.Labels, p.Annotations, s.opts.UniqueAppIDs)
		if len(p.Spec.SchedulingGates) > 0 {
			appID = "" // the shim attaches a gated Pod to no application
		}
		id, ok := s.checkValue(res, p.Annotations, "the Pod")
		if _, present := p.Annotations[AnnotationKey]; !present {
			s.adoptable(res, &p.ObjectMeta, p.Labels)
		}
		if ok {
			s.checkOwner(ctx, res, p, id, appID)
			if s.opts.Queues != nil {
				s.checkQueue(ctx, res, p, id, appID)
			}
			if appID != "" && s.counted(p) {
				s.recordApp(appID, id.User, p.CreationTimestamp.Time, res, !s.failed)
			}
		}
		if s.failed {
			last := &s.report.Findings[len(s.report.Findings)-1]
			if last.Resource.UID == res.UID && last.AppID == "" {
				last.AppID = appID
			}
		}
		s.audited(res)
	})
}

// DefaultCompletingTimeout is yunikorn-core v1.9's completingTimeout.
const DefaultCompletingTimeout = 30 * time.Second

// counted reports whether YuniKorn still counts the Pod p in its
// application: it has not finished, or finished less than
// CompletingTimeout ago by its containers' latest finish time (a
// finished Pod with none finished now), as the policy's check counts it
// (docs/BEHAVIOUR.md §3.5).
func (s *scan) counted(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		return true
	}
	if s.opts.CompletingTimeout < 0 {
		return false
	}
	var last time.Time
	for _, c := range p.Status.ContainerStatuses {
		if t := c.State.Terminated; t != nil && t.FinishedAt.After(last) {
			last = t.FinishedAt.Time
		}
	}
	now := s.opts.Now()
	if last.IsZero() || last.After(now) {
		return true
	}
	return now.Sub(last) < s.opts.CompletingTimeout
}

// checkOwner compares the Pod's identity with its controller's template.
func (s *scan) checkOwner(ctx context.Context, res Resource, p *corev1.Pod, id Identity, appID string) {
	s.compareOwner(ctx, res, metav1.GetControllerOf(p), id, appID, "the Pod")
}

// compareOwner compares what an object (or its template, what) records
// with what its controller ref records, when the controller is a kind
// whose record is read: a built-in controller of Pods, or an owner kind of
// the workloads setting.
func (s *scan) compareOwner(ctx context.Context, res Resource, ref *metav1.OwnerReference, id Identity, appID, what string) {
	if ref == nil {
		return
	}
	o, err := s.owner(ctx, res.Namespace, ref)
	if err != nil {
		s.opts.Logger.Warn("audit: controller not read", "object", res.Kind+" "+res.Namespace+"/"+res.Name, "owner", ref.Kind+"/"+ref.Name, "error", err)
		s.report.OwnersUnread++
		return
	}
	if !o.known || !o.valid {
		// Not a kind whose record is read, gone, or one without a usable
		// value: reported on the controller itself.
		return
	}
	if !o.id.Equal(id) {
		where := "in its template"
		if o.custom {
			where = "(" + o.where + ")"
		}
		s.add(Finding{Rule: RuleOwnerMismatch, Resource: res, User: id.User, AppID: appID,
			Message: fmt.Sprintf("%s names user %q%s, but its controller %s %s records user %q%s %s",
				what, id.User, groupsText(id), ref.Kind, ref.Name, o.id.User, groupsText(o.id), where)})
	}
}

func groupsText(id Identity) string {
	if len(id.Groups) == 0 {
		return ""
	}
	return fmt.Sprintf(" (groups %q)", id.Groups)
}

// recordApp keeps, per application, the users of its Pods.
func (s *scan) recordApp(appID, user string, created time.Time, res Resource, passed bool) {
	ns, ok := s.namespaces[res.Namespace]
	if !ok {
		ns = res.Namespace
		s.namespaces[ns] = ns
	}
	res.Namespace = ns
	a := s.apps[appID]
	if a == nil {
		a = &appUsers{}
		s.apps[appID] = a
	} else if ns != a.users[0].example.Namespace {
		// Every example is a namespace of the application's: all its Pods
		// are in one namespace only if every Pod's is the first user's.
		a.multiNS = true
	}
	for i := range a.users {
		u := &a.users[i]
		if u.user == user {
			u.pods++
			u.addNS(ns)
			if podOlder(created, res, u.oldest, u.example) {
				u.oldest, u.example, u.passed = created, res, passed
			}
			return
		}
	}
	a.users = append(a.users, appUser{user: user, pods: 1, oldest: created, example: res, passed: passed})
}

// sharedApps reports every application whose Pods name more than one
// user: YuniKorn gives the application to the user of its first Pod, so
// the user with the oldest Pod is taken as the owner and the oldest Pod
// of every other user is reported.
func (s *scan) sharedApps() {
	ids := make([]string, 0)
	for id, a := range s.apps {
		if a.multiNS {
			s.report.CrossNamespaceApps++
		}
		if len(a.users) > 1 {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		a := s.apps[id]
		sort.Slice(a.users, func(i, j int) bool {
			return podOlder(a.users[i].oldest, a.users[i].example, a.users[j].oldest, a.users[j].example)
		})
		owner := a.users[0]
		others := ""
		if len(a.users) > 2 {
			others = fmt.Sprintf("; %d users in all", len(a.users))
		}
		for _, u := range a.users[1:] {
			s.report.Findings = append(s.report.Findings, Finding{Rule: RuleSharedAppID, Resource: u.example, User: u.user, AppID: id,
				Message: fmt.Sprintf("application %s is shared by users %q (%d pods, oldest %s/%s) and %q (%d pods, oldest this one)%s",
					id, owner.user, owner.pods, owner.example.Namespace, owner.example.Name, u.user, u.pods, others)})
		}
		// Keep the pass counts right: the example Pods failed after all.
		for _, u := range a.users[1:] {
			if u.passed {
				s.report.Passed[u.example.Namespace]--
			}
		}
		if a.multiNS && s.report.AllNamespaces {
			s.report.ClusterFindings = append(s.report.ClusterFindings, clusterFinding(id, a))
		}
	}
}

// clusterFinding describes an application whose Pods in several
// namespaces name several users (a.users sorted, the owner first).
func clusterFinding(id string, a *appUsers) ClusterFinding {
	listed := a.users[:min(len(a.users), maxUsersPerApp)]
	f := ClusterFinding{Rule: RuleSharedAppID, AppID: id, MoreUsers: len(a.users) - len(listed)}
	all := map[string]bool{}
	parts := make([]string, 0, len(listed))
	for i := range listed {
		u := &listed[i]
		nss := u.namespacesOf()
		for _, ns := range nss {
			all[ns] = true
		}
		f.Users = append(f.Users, AppUser{User: u.user, Pods: u.pods, Namespaces: nss, MoreNamespaces: u.moreNS(), Oldest: u.example})
		where := strings.Join(nss, ", ")
		if u.moreNS() {
			where += ", ..."
		}
		owner := ""
		if i == 0 {
			owner = "owner: "
		}
		part := fmt.Sprintf("%q (%s%d pods in %s, oldest %s/%s)", u.user, owner, u.pods, where, u.example.Namespace, u.example.Name)
		parts = append(parts, part)
	}
	for ns := range all {
		f.Namespaces = append(f.Namespaces, ns)
	}
	sort.Strings(f.Namespaces)
	more := ""
	if f.MoreUsers > 0 {
		more = fmt.Sprintf("; %d more users not listed", f.MoreUsers)
	}
	f.Message = fmt.Sprintf("application %s (YuniKorn's application IDs are cluster-wide) has Pods in namespaces %s naming %d users: %s%s",
		id, strings.Join(f.Namespaces, ", "), len(a.users), strings.Join(parts, ", "), more)
	return f
}
