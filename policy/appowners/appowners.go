// Package appowners holds the parameters of the application-ownership
// model (docs/BEHAVIOUR.md §3.5) that the policy and the host's index of
// application owners share: which scheduler's Pods count, how IDs are
// generated, how long a finished or deleted Pod still holds its
// application, which label names a user; the index's name, which spells
// them all, so that a policy with other parameters finds no index rather
// than a wrong one; and when a finished Pod stops holding its
// application; and FromSettings, the one reading of those parameters from
// the policy's settings, which the policy and the host both call. It is
// TinyGo-safe: the policy module imports it.
package appowners

import (
	"errors"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/policy/jsontext"
	"github.com/yunikorn-userinfo/userinfo/policy/userinfo"
)

// Defaults of the model's parameters: YuniKorn's scheduler name, and
// yunikorn-core v1.9's completingTimeout.
const (
	DefaultSchedulerName     = "yunikorn"
	DefaultCompletingTimeout = 30 * time.Second
)

// Options are the model's parameters.
type Options struct {
	// SchedulerName: only Pods of this scheduler join applications.
	SchedulerName string
	// UniqueAppIDs mirrors the admission controller's
	// generateUniqueAppId: a Pod without an ID gets one of its own.
	UniqueAppIDs bool
	// CompletingTimeout is how long an application outlives its last
	// task: a finished or deleted Pod holds it that long.
	CompletingTimeout time.Duration
	// UserLabelKey is the legacy label naming a Pod's user when it has
	// no user.info annotation.
	UserLabelKey string
}

// IndexName is the name of the host index that answers for these
// options: every parameter, quoted, after the model's version.
func (o Options) IndexName() string {
	b := make([]byte, 0, 96)
	b = append(b, "application-owners/v1 scheduler="...)
	b = strconv.AppendQuote(b, o.SchedulerName)
	b = append(b, " unique="...)
	b = strconv.AppendBool(b, o.UniqueAppIDs)
	b = append(b, " completing="...)
	b = strconv.AppendInt(b, int64(o.CompletingTimeout), 10)
	b = append(b, " userLabel="...)
	b = strconv.AppendQuote(b, o.UserLabelKey)
	return string(b)
}

// FromSettings reads the model's options from the policy's settings (a
// JSON object, as validate_settings accepted it): applicationOwnership (a
// mode, or an object with mode, schedulerName, generateUniqueAppIds and
// completingTimeout), scheduling.generateUniqueAppIds (the default of
// applicationOwnership's: both say how the IDs of Pods without one are
// made) and userLabelKey, each else its default. on is false when the
// check is off. The policy takes its options from here and the host
// builds its index from here, so the two cannot name different indexes.
// YuniKorn's ConfigMaps never change them: the scheduler reads
// generateUniqueAppId only when it starts (docs/BEHAVIOUR.md §3.11).
func FromSettings(settings string) (o Options, on bool, err error) {
	o = Options{SchedulerName: DefaultSchedulerName, CompletingTimeout: DefaultCompletingTimeout, UserLabelKey: userinfo.DefaultLabelKey}
	if settings == "" {
		return o, false, nil
	}
	if !gjson.Valid(settings) {
		return o, false, errors.New("read the settings for the application index: not valid JSON")
	}
	doc := gjson.Parse(settings)
	if v := doc.Get("userLabelKey"); v.Type == gjson.String {
		o.UserLabelKey = jsontext.Str(v)
	}
	if v := doc.Get("scheduling.generateUniqueAppIds"); v.IsBool() {
		o.UniqueAppIDs = v.Bool()
	}
	a := doc.Get("applicationOwnership")
	if a.Type == gjson.String {
		mode := jsontext.Str(a)
		return o, mode != "" && mode != "off", nil
	}
	if !a.IsObject() {
		return o, false, nil
	}
	if v := a.Get("schedulerName"); v.Type == gjson.String {
		o.SchedulerName = jsontext.Str(v)
	}
	if v := a.Get("generateUniqueAppIds"); v.IsBool() {
		o.UniqueAppIDs = v.Bool()
	}
	if v := a.Get("completingTimeout"); v.Exists() {
		d, err := time.ParseDuration(jsontext.Str(v))
		if v.Type != gjson.String || err != nil || d < 0 {
			return o, false, errors.New("settings.applicationOwnership.completingTimeout: " + v.Raw + " is not a duration of zero or more")
		}
		o.CompletingTimeout = d
	}
	mode := jsontext.Str(a.Get("mode"))
	return o, mode != "" && mode != "off", nil
}

// Finished reports whether a Pod in phase has finished: the shim
// completes its task then.
func Finished(phase string) bool { return phase == "Succeeded" || phase == "Failed" }

// Latest is the latest of the containers' finish times (RFC 3339 strings;
// others are skipped), and whether there was one.
func Latest(finishedAt []string) (time.Time, bool) {
	var last time.Time
	known := false
	for _, s := range finishedAt {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			continue
		}
		if !known || t.After(last) {
			last, known = t, true
		}
	}
	return last, known
}

// FinishMargin is how much longer than completingTimeout a finished or
// deleted Pod holds its application here. The kubelet writes finishedAt in
// whole seconds, before the shim sees the Pod finish, and the core's timer
// starts only when the shim has released the Pod's allocation: measured
// against yunikorn-core in-process, its window ends up to a second (plus
// the status's way to the shim) after finishedAt + completingTimeout.
// Holding longer only refuses a little longer; holding shorter lets
// another user's Pod into an application the core still keeps.
const FinishMargin = 2 * time.Second

// Window is how long a finished or deleted Pod holds its application:
// completingTimeout and the margin, or nothing when completingTimeout is
// zero (finished Pods then hold nothing).
func (o Options) Window() time.Duration {
	if o.CompletingTimeout <= 0 {
		return 0
	}
	return o.CompletingTimeout + FinishMargin
}

// HeldUntil is when a finished Pod whose containers last finished at last
// (known: it has a finish time) stops holding its application, seen at
// now: Window after it finished; a Pod with no finish time, or one the
// clock has not reached, finished now.
func (o Options) HeldUntil(last time.Time, known bool, now time.Time) time.Time {
	if !known || last.After(now) {
		last = now
	}
	return last.Add(o.Window())
}
