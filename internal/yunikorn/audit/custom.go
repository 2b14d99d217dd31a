package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/yunikorn-userinfo/userinfo/policy/jsontext"
	"github.com/yunikorn-userinfo/userinfo/policy/jsonx"
	"github.com/yunikorn-userinfo/userinfo/policy/workloads"
)

// kindRefOf is the group and kind an owner reference names.
func kindRefOf(ref *metav1.OwnerReference) workloads.KindRef {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return workloads.KindRef{Kind: ref.Kind}
	}
	return workloads.KindRef{Group: gv.Group, Kind: ref.Kind}
}

// resolveKinds finds, before anything is listed, the resources of the
// custom kinds of the workloads setting (an owner read while the built-in
// kinds are audited must be known); a kind the API server does not serve
// is reported once and skipped.
func (s *scan) resolveKinds(ctx context.Context) error {
	if s.opts.Workloads == nil {
		return nil
	}
	for i := range s.opts.Workloads.Kinds {
		k := &s.opts.Workloads.Kinds[i]
		gvr, namespaced, reason, err := s.resolve(ctx, k)
		if err != nil {
			return err
		}
		if reason == "" && !namespaced {
			reason = "the API server serves it cluster-scoped; only namespaced kinds make Pods of a namespace"
		}
		if reason != "" {
			s.skip(k, gvr.Version, reason)
			continue
		}
		s.gvrs[k.KindRef] = gvr
	}
	return nil
}

// customKinds audits the objects of every custom kind served, page by
// page like the built-in kinds.
func (s *scan) customKinds(ctx context.Context) error {
	if s.opts.Workloads == nil {
		return nil
	}
	for i := range s.opts.Workloads.Kinds {
		k := &s.opts.Workloads.Kinds[i]
		gvr, served := s.gvrs[k.KindRef]
		if !served {
			continue
		}
		apiVersion := gvr.GroupVersion().String()
		res := s.opts.Dynamic.Resource(gvr).Namespace(s.opts.Namespace)
		err := page(ctx, s, k.String(), func(ctx context.Context, o metav1.ListOptions) ([]unstructured.Unstructured, metav1.ListMeta, error) {
			l, err := res.List(ctx, o)
			if err != nil {
				return nil, metav1.ListMeta{}, err
			}
			meta := metav1.ListMeta{Continue: l.GetContinue(), RemainingItemCount: l.GetRemainingItemCount()}
			return l.Items, meta, nil
		}, func(u *unstructured.Unstructured) { s.checkCustom(ctx, k, apiVersion, u) })
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *scan) skip(k *workloads.Kind, version, reason string) {
	s.report.Skipped = append(s.report.Skipped, SkippedKind{Group: k.Group, Version: version, Kind: k.Kind, Entry: k.Entry, Reason: reason})
	s.opts.Logger.Debug("audit: custom kind not audited", "kind", k.String(), "entry", k.Entry, "reason", reason)
	if s.opts.Progress != nil {
		fmt.Fprintf(s.opts.Progress, "audit: %s (%s): not audited: %s\n", k.String(), k.Entry, reason)
	}
}

// resolve finds the resource of a custom kind with discovery: the version
// the settings name (a preset's: the one its paths were read from), else
// the group's preferred one. reason, when not "", says why the kind is
// not served; err is a discovery failure other than not found.
func (s *scan) resolve(ctx context.Context, k *workloads.Kind) (gvr schema.GroupVersionResource, namespaced bool, reason string, err error) {
	if err := ctx.Err(); err != nil {
		return gvr, false, "", err
	}
	disc := s.cs.Discovery()
	version := k.Version
	if version == "" {
		groups, err := disc.ServerGroups()
		if err != nil {
			return gvr, false, "", fmt.Errorf("discover the API group of %s: %w", k.String(), err)
		}
		for _, g := range groups.Groups {
			if g.Name == k.Group {
				version = g.PreferredVersion.Version
			}
		}
		if version == "" {
			return gvr, false, "the API server does not serve the group " + groupName(k.Group) + " (is its CRD installed?)", nil
		}
	}
	gv := schema.GroupVersion{Group: k.Group, Version: version}
	gvr = gv.WithResource("")
	list, err := disc.ServerResourcesForGroupVersion(gv.String())
	if apierrors.IsNotFound(err) {
		return gvr, false, "the API server does not serve " + gv.String() + " (is its CRD installed?)", nil
	}
	if err != nil {
		return gvr, false, "", fmt.Errorf("discover the resource of %s in %s: %w", k.String(), gv, err)
	}
	for _, r := range list.APIResources {
		if r.Kind == k.Kind && !strings.Contains(r.Name, "/") {
			if k.Resource != "" && r.Name != k.Resource {
				s.opts.Logger.Warn("audit: custom kind served under another resource name than the settings give", "kind", k.String(), "settings", k.Resource, "server", r.Name)
			}
			return gv.WithResource(r.Name), r.Namespaced, "", nil
		}
	}
	return gvr, false, "the API server serves " + gv.String() + " but no kind " + k.Kind + " in it", nil
}

func groupName(g string) string {
	if g == "" {
		return "core"
	}
	return g
}

// checkCustom audits one object of a custom kind: every template its paths
// name, and its own annotations, must record one valid identity; that
// identity must be its controller's when an operator made it.
func (s *scan) checkCustom(ctx context.Context, k *workloads.Kind, apiVersion string, u *unstructured.Unstructured) {
	res := Resource{APIVersion: apiVersion, Kind: k.Kind, Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID()}
	tmpls, err := templatesOf(k, u)
	if err != nil {
		s.add(Finding{Rule: RuleInvalid, Resource: res,
			Message: "the object's templates cannot be read at the paths of " + k.Entry + ": " + err.Error()})
		s.auditedKind(res, k.String())
		return
	}
	if otherScheduler(tmpls, s.opts.SchedulerName) && !s.processedNS(ctx, res.Namespace) {
		return
	}
	id, ok := s.checkRecord(res, tmpls)
	if !ok && recordsNone(tmpls) {
		meta := metav1.ObjectMeta{OwnerReferences: u.GetOwnerReferences(), CreationTimestamp: u.GetCreationTimestamp(),
			ManagedFields: u.GetManagedFields()}
		s.adoptable(res, &meta, u.GetLabels())
	}
	if ok {
		s.compareOwner(ctx, res, metav1.GetControllerOfNoCopy(u), id, "", "the object")
	}
	s.auditedKind(res, k.String())
}

// recordsNone reports whether no template, nor the object's own
// annotations, carries user.info: what an adoption fixes.
func recordsNone(tmpls []workloads.Template) bool {
	for i := range tmpls {
		if tmpls[i].Present {
			return false
		}
	}
	return true
}

// templatesOf finds the templates of an object of a custom kind, as the
// policy finds them: on the object as JSON.
func templatesOf(k *workloads.Kind, u *unstructured.Unstructured) ([]workloads.Template, error) {
	b, err := json.Marshal(u.Object)
	if err != nil {
		return nil, fmt.Errorf("encode the object as JSON: %w", err)
	}
	// b is not written again: the text need not be copied.
	return k.Templates(gjson.Parse(unsafe.String(unsafe.SliceData(b), len(b))))
}

// otherScheduler reports whether every pod template found names a
// scheduler other than YuniKorn in its spec.schedulerName (none of its
// Pods reach YuniKorn). Templates without one are YuniKorn's as far as a
// scan can tell: operators set the scheduler of their Pods themselves.
func otherScheduler(tmpls []workloads.Template, scheduler string) bool {
	pods := 0
	for _, t := range tmpls {
		if !t.Holder.Exists() {
			continue
		}
		pods++
		name := ""
		if spec, _ := jsonx.Member(t.Holder, "spec"); spec.IsObject() {
			if n, _ := jsonx.Member(spec, "schedulerName"); n.Type == gjson.String {
				name = jsontext.Str(n)
			}
		}
		if name == "" || name == scheduler {
			return false
		}
	}
	return pods > 0
}

// checkRecord applies the rules to the templates of one object: at least
// one records the identity, every one that does records the same valid
// value, and no pod template lacks it (the Pods made from it would carry
// none). It returns the identity when there is one to compare.
func (s *scan) checkRecord(res Resource, tmpls []workloads.Template) (Identity, bool) {
	var first *workloads.Template
	var lacking []string
	for i := range tmpls {
		t := &tmpls[i]
		if !t.Present {
			if t.Field != workloads.RecordPath {
				lacking = append(lacking, t.Field)
			}
			continue
		}
		if first == nil {
			first = t
			continue
		}
		if t.Value != first.Value {
			s.add(Finding{Rule: RuleInvalid, Resource: res,
				Message: AnnotationKey + " differs between " + first.Field + " and " + t.Field + ": every pod template must record the same submitter"})
			return Identity{}, false
		}
	}
	if first == nil {
		s.add(Finding{Rule: RuleMissing, Resource: res,
			Message: "no pod template nor the object's own metadata has an " + AnnotationKey + " annotation: YuniKorn does not know who submitted it"})
		return Identity{}, false
	}
	id, err := ParseUserInfo(first.Value)
	if err != nil {
		s.add(Finding{Rule: RuleInvalid, Resource: res,
			Message: first.Field + " has an invalid " + AnnotationKey + " annotation: " + err.Error()})
		return Identity{}, false
	}
	if len(lacking) > 0 {
		s.add(Finding{Rule: RuleMissing, Resource: res, User: id.User,
			Message: fmt.Sprintf("%s %s no %s annotation, while %s records user %q: the Pods made from %s carry none",
				strings.Join(lacking, ", "), plural(len(lacking), "has", "have"), AnnotationKey, first.Field, id.User, plural(len(lacking), "it", "them"))})
	}
	return id, true
}

func plural(n int, one, more string) string {
	if n == 1 {
		return one
	}
	return more
}

// auditedKind is audited for a kind counted under another name than the
// resource's kind (Kind.group for custom kinds).
func (s *scan) auditedKind(res Resource, counted string) {
	s.report.Audited[counted]++
	if !s.failed {
		s.report.Passed[res.Namespace]++
	}
	s.failed = false
}

// customOwner reads what a controller of an owner kind of the workloads
// setting records: a custom kind's templates and own annotations, or a
// Pod's annotation (LeaderWorkerSet's worker StatefulSets are owned by
// their leader Pod). Other kinds are not read.
func (s *scan) customOwner(ctx context.Context, ns string, ref *metav1.OwnerReference) (ownerInfo, error) {
	key := string(ref.UID)
	kr := kindRefOf(ref)
	wk := s.opts.Workloads.Kind(kr)
	gvr, served := s.gvrs[kr]
	pod := kr == (workloads.KindRef{Kind: "Pod"}) && s.opts.Workloads.IsOwner(kr)
	if !pod && (wk == nil || !served || !s.opts.Workloads.IsOwner(kr)) {
		s.owners.put(key, ownerInfo{})
		return ownerInfo{}, nil
	}
	info := ownerInfo{known: true, custom: true}
	var uid string
	if pod {
		p, err := s.cs.CoreV1().Pods(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			s.owners.put(key, ownerInfo{})
			return ownerInfo{}, nil
		}
		if err != nil {
			return ownerInfo{}, fmt.Errorf("get Pod %s/%s: %w", ns, ref.Name, err)
		}
		uid, info.where = string(p.UID), "in its own annotations"
		if v, ok := p.Annotations[AnnotationKey]; ok {
			if id, err := ParseUserInfo(v); err == nil {
				info.valid, info.id = true, id
			}
		}
	} else {
		u, err := s.opts.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			s.owners.put(key, ownerInfo{})
			return ownerInfo{}, nil
		}
		if err != nil {
			return ownerInfo{}, fmt.Errorf("get %s %s/%s: %w", wk.String(), ns, ref.Name, err)
		}
		uid, info.where = string(u.GetUID()), "in its pod templates and own annotations"
		if id, ok := recorded(wk, u); ok {
			info.valid, info.id = true, id
		}
	}
	// An owner recreated under the same name is another object.
	if uid != string(ref.UID) {
		s.owners.put(key, ownerInfo{})
		return ownerInfo{}, nil
	}
	s.owners.put(key, info)
	return info, nil
}

// recorded is the identity an object of a custom kind records: the one
// valid value every template that has one carries.
func recorded(k *workloads.Kind, u *unstructured.Unstructured) (Identity, bool) {
	tmpls, err := templatesOf(k, u)
	if err != nil { // malformed: reported on the object itself
		return Identity{}, false
	}
	value, found := "", false
	for _, t := range tmpls {
		if !t.Present {
			continue
		}
		if found && t.Value != value {
			return Identity{}, false
		}
		value, found = t.Value, true
	}
	if !found {
		return Identity{}, false
	}
	id, err := ParseUserInfo(value)
	return id, err == nil
}
