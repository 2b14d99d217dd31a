package queues

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strconv"
	"strings"
)

// core's checks of queue resources, limits, maxapplications and the node
// sorting policy (configs.Validate), with its words. Where core walks a
// Go map and could meet two problems in either order, the keys are taken
// in sorted order here (docs/QUEUES.md).

// resource is core's resources.Resource: quantities by resource name.
type resource map[string]int64

// vcore is core's common.CPU, the one resource whose quantities are
// read in millicores.
const vcore = "vcore"

// String is core's Resource.String, fmt's %v of the map.
func (r resource) String() string {
	if r == nil {
		return "nil resource"
	}
	var b strings.Builder
	b.WriteString("map[")
	for i, k := range sortedKeys(r) {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k)
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(r[k], 10))
	}
	b.WriteByte(']')
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// newResource is core's NewResourceFromConf.
func newResource(conf map[string]string) (resource, error) {
	r := resource{}
	for _, k := range sortedKeys(conf) {
		q, err := parseQuantity(conf[k], k == vcore)
		if err != nil {
			return nil, err
		}
		r[k] = q
	}
	return r, nil
}

var multipliers = map[string]int64{
	"": 1, "m": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
	"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60,
}

// parseQuantity is core's ParseQuantity (milli false) and ParseVCore
// (milli true): digits, optional blanks, an optional SI suffix.
func parseQuantity(value string, milli bool) (int64, error) {
	value = strings.TrimSpace(value)
	i := 0
	for i < len(value) && value[i] >= '0' && value[i] <= '9' {
		i++
	}
	number := value[:i]
	for i < len(value) && strings.IndexByte(" \t\n\f\r", value[i]) >= 0 {
		i++
	}
	suffix := value[i:]
	legal := len(suffix) == 0 ||
		(strings.IndexByte("mkKMGTPE", suffix[0]) >= 0 && (len(suffix) == 1 || (len(suffix) == 2 && suffix[1] == 'i')))
	if number == "" || !legal {
		return 0, errors.New("invalid quantity")
	}
	n, err := strconv.ParseInt(number, 10, 64)
	if err != nil {
		return 0, errors.New("invalid quantity: overflow")
	}
	scale, ok := multipliers[suffix]
	if !ok || (suffix == "m" && !milli) {
		return 0, errors.New("invalid suffix")
	}
	v, ok := mulNonNegative(n, scale)
	if ok && milli && suffix != "m" {
		v, ok = mulNonNegative(v, 1000)
	}
	if !ok {
		return 0, errors.New("invalid quantity: overflow")
	}
	return v, nil
}

func mulNonNegative(a, b int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	return int64(lo), true
}

// fitInMaxUndef is core's FitInMaxUndef: every quantity of smaller that
// r defines is at most r's (negative ones in r counting as 0).
func (r resource) fitInMaxUndef(smaller resource) bool {
	for k, v := range smaller {
		larger, ok := r[k]
		if !ok {
			continue
		}
		if v > max(0, larger) {
			return false
		}
	}
	return true
}

// addTo is core's AddTo, whose sums stop at the int64 bounds.
func (r resource) addTo(add resource) {
	for k, v := range add {
		a := r[k]
		sum := a + v
		if (sum < a) != (v < 0) {
			if a < 0 {
				sum = math.MinInt64
			} else {
				sum = math.MaxInt64
			}
		}
		r[k] = sum
	}
}

func isZero(r resource) bool {
	for _, v := range r {
		if v != 0 {
			return false
		}
	}
	return true
}

// componentWiseMin is core's ComponentWiseMin.
func componentWiseMin(left, right resource) resource {
	if left == nil && right == nil {
		return nil
	}
	out := resource{}
	for k, v := range left {
		out[k] = v
	}
	for k, v := range right {
		if l, ok := out[k]; !ok || v < l {
			out[k] = v
		}
	}
	return out
}

// checkResourceConfig is core's: both maps parse, guaranteed within max.
func checkResourceConfig(q *queueConfig) (g, m resource, err error) {
	if g, err = newResource(q.guaranteed); err != nil {
		return nil, nil, err
	}
	if m, err = newResource(q.max); err != nil {
		return nil, nil, err
	}
	if !m.fitInMaxUndef(g) {
		return nil, nil, fmt.Errorf("guaranteed resource %s is larger than maximum resource %s for queue %s", g, m, q.name)
	}
	return g, m, nil
}

// checkQueueResource is core's: depth first, a queue's max within its
// parent's, its children's guaranteed within its own guaranteed and max.
func checkQueueResource(q *queueConfig, parentMax resource) (resource, error) {
	g, m, err := checkResourceConfig(q)
	if err != nil {
		return nil, err
	}
	if !parentMax.fitInMaxUndef(m) {
		return nil, fmt.Errorf("max resource of parent %s is smaller than maximum resource %s for queue %s", parentMax, m, q.name)
	}
	m = componentWiseMin(m, parentMax)
	sum := resource{}
	for i := range q.queues {
		childG, err := checkQueueResource(&q.queues[i], m)
		if err != nil {
			return nil, err
		}
		sum.addTo(childG)
	}
	if !g.fitInMaxUndef(sum) {
		return nil, fmt.Errorf("guaranteed resource of parent %s is smaller than sum of guaranteed resources %s of the children for queue %s", g, sum, q.name)
	}
	if !m.fitInMaxUndef(sum) {
		return nil, fmt.Errorf("max resource %s is smaller than sum of guaranteed resources %s of the children for queue %s", m, sum, q.name)
	}
	if isZero(g) {
		return sum, nil
	}
	return g, nil
}

// checkLimits is core's check of a queue's limits list.
func checkLimits(limits []limitConfig, q *queueConfig) error {
	users, groups := map[string]bool{}, map[string]bool{}
	for _, l := range limits {
		if err := checkLimit(l, users, groups, q); err != nil {
			return err
		}
	}
	return nil
}

func checkLimit(l limitConfig, users, groups map[string]bool, q *queueConfig) error {
	if len(l.users) == 0 && len(l.groups) == 0 {
		return fmt.Errorf("empty user and group lists defined in limit '%s'", l)
	}
	for _, name := range l.users {
		if name != wildcard && !userRegExp.MatchString(name) {
			return fmt.Errorf("invalid limit user name '%s' in limit definition", name)
		}
		if users[name] {
			return fmt.Errorf("duplicated user name '%s', already exists", name)
		}
		users[name] = true
		if users[wildcard] && name != wildcard {
			return fmt.Errorf("should not set no wildcard user %s after wildcard user limit", name)
		}
	}
	for _, name := range l.groups {
		if name != wildcard && !groupRegExp.MatchString(name) {
			return fmt.Errorf("invalid limit group name '%s' in limit definition", name)
		}
		if groups[name] {
			return fmt.Errorf("duplicated group name '%s'", name)
		}
		groups[name] = true
		if groups[wildcard] && name != wildcard {
			return fmt.Errorf("should not set no wildcard group %s after wildcard group limit", name)
		}
	}
	if groups[wildcard] && len(groups) == 1 {
		return fmt.Errorf("should not specify only one group limit that is using the wildcard. " +
			"There must be at least one limit with a group name defined ")
	}
	limitRes := resource{}
	if len(l.maxResources) != 0 {
		var err error
		if limitRes, err = newResource(l.maxResources); err != nil {
			return err
		}
		if !strictlyGreaterThanZero(limitRes) {
			return fmt.Errorf("MaxResources should be greater than zero in '%s' limit", l.limit)
		}
	}
	if l.maxApps == 0 && len(l.maxResources) == 0 {
		return fmt.Errorf("invalid resource combination for limit %s all resource limits are null", l.limit)
	}
	if q.maxApps != 0 && q.maxApps < l.maxApps {
		return fmt.Errorf("invalid MaxApplications settings for limit %s exceed current the queue MaxApplications", l.limit)
	}
	if q.name != rootQueue {
		queueMax, err := newResource(q.max)
		if err != nil {
			return fmt.Errorf("parse queue %s max resource failed: %s", q.name, err.Error())
		}
		if !queueMax.fitInMaxUndef(limitRes) {
			return fmt.Errorf("invalid MaxResources settings for limit %s exeecd current the queue MaxResources", l.limit)
		}
	}
	return nil
}

// String is fmt's %v of core's Limit struct.
func (l limitConfig) String() string {
	m := make(map[string]int, len(l.maxResources))
	for k := range l.maxResources {
		m[k] = 0
	}
	var b strings.Builder
	b.WriteString("{" + l.limit + " [" + strings.Join(l.users, " ") + "] [" + strings.Join(l.groups, " ") + "] map[")
	for i, k := range sortedKeys(m) {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k + ":" + l.maxResources[k])
	}
	b.WriteString("] " + strconv.FormatUint(l.maxApps, 10) + "}")
	return b.String()
}

func strictlyGreaterThanZero(r resource) bool {
	greater := false
	for _, v := range r {
		if v < 0 {
			return false
		}
		if v > 0 {
			greater = true
		}
	}
	return greater
}

// limitsEqual is reflect.DeepEqual of two limit lists, as core compares
// a partition's limits with its root queue's.
func limitsEqual(a, b []limitConfig) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.limit != y.limit || x.maxApps != y.maxApps || !stringsEqual(x.users, y.users) || !stringsEqual(x.groups, y.groups) ||
			len(x.maxResources) != len(y.maxResources) || (x.maxResources == nil) != (y.maxResources == nil) {
			return false
		}
		for k, v := range x.maxResources {
			if w, ok := y.maxResources[k]; !ok || w != v {
				return false
			}
		}
	}
	return true
}

func stringsEqual(a, b []string) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// checkNodeSortingPolicy is core's: a known policy, no negative weight.
func checkNodeSortingPolicy(p *partitionConfig) error {
	switch p.nodeSort {
	case "", "fair", "binpacking":
	default:
		return fmt.Errorf("undefined policy: %s", p.nodeSort)
	}
	for _, k := range sortedKeys(p.weights) {
		if p.weights[k] < 0 {
			return fmt.Errorf("negative resource weight for %s is not allowed", k)
		}
	}
	return nil
}

// checkQueueMaxApplications is core's: a parent's maxapplications bounds
// its children's, which must then be set.
func checkQueueMaxApplications(q *queueConfig) error {
	for i := range q.queues {
		c := &q.queues[i]
		if q.maxApps != 0 && q.maxApps < c.maxApps {
			return fmt.Errorf("parent maxApplications must be larger than child maxApplications")
		}
		if q.maxApps != 0 && c.maxApps == 0 {
			return fmt.Errorf("maxApplications is either undefined or zero, which is not allowed when parent queue's maxApplications is defined")
		}
		if err := checkQueueMaxApplications(c); err != nil {
			return err
		}
	}
	return nil
}

// checkLimitResource is core's: a user's or group's maxresources within
// what an ancestor's limit for the same name, or its wildcard, allows.
func checkLimitResource(q *queueConfig, parentUsers, parentGroups map[string]resource) error {
	users, groups := make(map[string]resource, len(parentUsers)), make(map[string]resource, len(parentGroups))
	for k, v := range parentUsers {
		users[k] = v
	}
	for k, v := range parentGroups {
		groups[k] = v
	}
	for _, l := range q.limits {
		limitMax, err := newResource(l.maxResources)
		if err != nil {
			return err
		}
		for _, pass := range [...]struct {
			what           string
			names          []string
			parent, limits map[string]resource
		}{{"user", l.users, parentUsers, users}, {"group", l.groups, parentGroups, groups}} {
			for _, name := range pass.names {
				if existing, ok := pass.parent[name]; ok {
					if !existing.fitInMaxUndef(limitMax) {
						return fmt.Errorf("%s %s max resource %s of queue %s is greater than immediate or ancestor parent maximum resource %s", pass.what, name, limitMax, q.name, existing)
					}
					pass.limits[name] = componentWiseMin(limitMax, existing)
				} else if existing, ok := pass.parent[wildcard]; name != wildcard && ok {
					if !existing.fitInMaxUndef(limitMax) {
						return fmt.Errorf("%s %s max resource %s of queue %s is greater than wildcard maximum resource %s of immediate or ancestor parent queue", pass.what, name, limitMax, q.name, existing)
					}
					pass.limits[name] = limitMax
				} else {
					pass.limits[name] = limitMax
				}
			}
		}
	}
	for i := range q.queues {
		if err := checkLimitResource(&q.queues[i], users, groups); err != nil {
			return err
		}
	}
	return nil
}

// checkLimitMaxApplications is core's, for maxapplications.
func checkLimitMaxApplications(q *queueConfig, parentUsers, parentGroups map[string]uint64) error {
	users, groups := make(map[string]uint64, len(parentUsers)), make(map[string]uint64, len(parentGroups))
	for k, v := range parentUsers {
		users[k] = v
	}
	for k, v := range parentGroups {
		groups[k] = v
	}
	for _, l := range q.limits {
		n := l.maxApps
		for _, pass := range [...]struct {
			what           string
			names          []string
			parent, limits map[string]uint64
		}{{"user", l.users, parentUsers, users}, {"group", l.groups, parentGroups, groups}} {
			for _, name := range pass.names {
				if existing, ok := pass.parent[name]; ok {
					if existing != 0 && (existing < n || n == 0) {
						return fmt.Errorf("%s %s max applications %d of queue %s is greater than immediate or ancestor parent max applications %d", pass.what, name, n, q.name, existing)
					}
				} else if existing, ok := pass.parent[wildcard]; name != wildcard && ok {
					if existing != 0 && (existing < n || n == 0) {
						return fmt.Errorf("%s %s max applications %d of queue %s is greater than wildcard max applications %d of immediate or ancestor parent queue", pass.what, name, n, q.name, existing)
					}
				}
				pass.limits[name] = n
			}
		}
	}
	for i := range q.queues {
		if err := checkLimitMaxApplications(&q.queues[i], users, groups); err != nil {
			return err
		}
	}
	return nil
}
