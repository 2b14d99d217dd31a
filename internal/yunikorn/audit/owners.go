package audit

import (
	"container/list"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ownerInfo is what is kept of a controller: whether its template was
// read, and the identity its template names.
type ownerInfo struct {
	known bool
	valid bool
	id    Identity
	// custom is an owner of the workloads setting; where says where it
	// records its identity, for messages.
	custom bool
	where  string
}

// owner returns what the Pod's controller template records, read on
// demand and kept in a bounded LRU cache (Pods of one controller usually
// come one after another in a page, so a small cache serves most).
func (s *scan) owner(ctx context.Context, ns string, ref *metav1.OwnerReference) (ownerInfo, error) {
	key := string(ref.UID)
	if v, ok := s.owners.get(key); ok {
		return v, nil
	}
	var tmpl *corev1.PodTemplateSpec
	var uid string
	opts := metav1.GetOptions{}
	var err error
	switch {
	case ref.APIVersion == "apps/v1" && ref.Kind == "ReplicaSet":
		o, e := s.cs.AppsV1().ReplicaSets(ns).Get(ctx, ref.Name, opts)
		if err = e; e == nil {
			tmpl, uid = &o.Spec.Template, string(o.UID)
		}
	case ref.APIVersion == "apps/v1" && ref.Kind == "StatefulSet":
		o, e := s.cs.AppsV1().StatefulSets(ns).Get(ctx, ref.Name, opts)
		if err = e; e == nil {
			tmpl, uid = &o.Spec.Template, string(o.UID)
		}
	case ref.APIVersion == "apps/v1" && ref.Kind == "DaemonSet":
		o, e := s.cs.AppsV1().DaemonSets(ns).Get(ctx, ref.Name, opts)
		if err = e; e == nil {
			tmpl, uid = &o.Spec.Template, string(o.UID)
		}
	case ref.APIVersion == "batch/v1" && ref.Kind == "Job":
		o, e := s.cs.BatchV1().Jobs(ns).Get(ctx, ref.Name, opts)
		if err = e; e == nil {
			tmpl, uid = &o.Spec.Template, string(o.UID)
		}
	case ref.APIVersion == "v1" && ref.Kind == "ReplicationController":
		o, e := s.cs.CoreV1().ReplicationControllers(ns).Get(ctx, ref.Name, opts)
		if err = e; e == nil {
			tmpl, uid = o.Spec.Template, string(o.UID)
		}
	default:
		return s.customOwner(ctx, ns, ref)
	}
	if apierrors.IsNotFound(err) {
		s.owners.put(key, ownerInfo{})
		return ownerInfo{}, nil
	}
	if err != nil {
		return ownerInfo{}, fmt.Errorf("get %s %s/%s: %w", ref.Kind, ns, ref.Name, err)
	}
	// A controller recreated under the same name is another object.
	if tmpl == nil || uid != string(ref.UID) {
		s.owners.put(key, ownerInfo{})
		return ownerInfo{}, nil
	}
	info := ownerInfo{known: true}
	if v, ok := tmpl.Annotations[AnnotationKey]; ok {
		if id, err := ParseUserInfo(v); err == nil {
			info.valid, info.id = true, id
		}
	}
	s.owners.put(key, info)
	return info, nil
}

// lru is a fixed-size least-recently-used cache.
type lru struct {
	size  int
	order *list.List
	items map[string]*list.Element
}

type lruEntry struct {
	key string
	val ownerInfo
}

func newLRU(size int) *lru {
	return &lru{size: size, order: list.New(), items: map[string]*list.Element{}}
}

func (c *lru) get(key string) (ownerInfo, bool) {
	e, ok := c.items[key]
	if !ok {
		return ownerInfo{}, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*lruEntry).val, true
}

func (c *lru) put(key string, v ownerInfo) {
	if e, ok := c.items[key]; ok {
		e.Value.(*lruEntry).val = v
		c.order.MoveToFront(e)
		return
	}
	c.items[key] = c.order.PushFront(&lruEntry{key: key, val: v})
	if c.order.Len() > c.size {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*lruEntry).key)
	}
}
