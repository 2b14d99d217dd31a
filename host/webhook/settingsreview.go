package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/yunikorn-userinfo/userinfo/host/admission"
	"github.com/yunikorn-userinfo/userinfo/host/settings"
)

// PathSettings serves the review of the webhook's own settings ConfigMap
// (see [Handler.CheckSettingsConfigMap]): a CREATE or UPDATE whose settings
// the policy's validate_settings refuses is refused with the policy's
// message, so that a `kubectl edit` the replicas would refuse at their next
// reload, or at their next start, is never stored.
const PathSettings = "/settings"

// SettingsConfigMap names the ConfigMap the settings file is mounted from,
// and the data key that holds the settings.
type SettingsConfigMap struct {
	Namespace, Name, Key string
}

// ParseSettingsConfigMap reads NAMESPACE/NAME and the key (the settings
// file's base name, as a ConfigMap volume names its files). flag names the
// value in errors.
func ParseSettingsConfigMap(flag, ref, key string) (SettingsConfigMap, error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return SettingsConfigMap{}, fmt.Errorf("invalid %s %q: want NAMESPACE/NAME", flag, ref)
	}
	if key == "" || key == "." || key == "/" {
		return SettingsConfigMap{}, fmt.Errorf("invalid %s: needs --settings-path, the file the ConfigMap's key is mounted as", flag)
	}
	return SettingsConfigMap{Namespace: ns, Name: name, Key: key}, nil
}

// settingsCheck is what PathSettings answers with: the ConfigMap, and the
// policy's validation (nil until the module is compiled).
type settingsCheck struct {
	cm       SettingsConfigMap
	validate func() settings.Validator
}

// CheckSettingsConfigMap makes PathSettings judge writes of cm with the
// validator validate returns (nil while the module is not compiled yet:
// the review is then refused with code 503, which the chart's
// failurePolicy Ignore turns into an admission). Call it before serving.
func (h *Handler) CheckSettingsConfigMap(cm SettingsConfigMap, validate func() settings.Validator) {
	h.settingsCheck.Store(&settingsCheck{cm: cm, validate: validate})
}

// serveSettingsReview answers one AdmissionReview of a ConfigMap write at
// PathSettings: allowed unless it is the settings ConfigMap and the policy
// refuses the settings under its key. The body is read and bounded as at
// /mutate.
func (h *Handler) serveSettingsReview(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, charged, rej := h.readRequest(w, r)
	defer func() { putBody(body) }()
	defer h.budget.release(charged)
	if rej != nil {
		h.refuse(w, r, start, rej, body)
		return
	}
	req, rej := h.decodeReview(body)
	if rej != nil {
		h.refuse(w, r, start, rej, body)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.deadline(r))
	defer cancel()
	// Not counted in admissions_total, whose stages are the policy's.
	resp := h.judgeSettings(ctx, req)
	if !resp.Allowed {
		h.log.WarnContext(ctx, "settings ConfigMap write refused", "namespace", req.Namespace, "name", req.Name,
			"user", req.UserName, "message", resp.Status.Message)
	}
	h.writeReview(w, http.StatusOK, resp)
}

func (h *Handler) judgeSettings(ctx context.Context, req *admission.Request) *admission.Response {
	c := h.settingsCheck.Load()
	allowed := &admission.Response{UID: req.UID, Allowed: true}
	if c == nil || req.Kind.Kind != "ConfigMap" || req.Namespace != c.cm.Namespace || req.Name != c.cm.Name || req.Object == nil {
		// Not ours: the registration sends only the settings ConfigMap,
		// and a check that is not asked for must never refuse.
		return allowed
	}
	var cm struct {
		Data map[string]*string `json:"data"`
	}
	if err := json.Unmarshal(req.Object, &cm); err != nil {
		return admission.Errored(req.UID, http.StatusBadRequest, fmt.Errorf("read the ConfigMap: %w", err))
	}
	text := cm.Data[c.cm.Key]
	if text == nil {
		return admission.Errored(req.UID, http.StatusUnprocessableEntity, fmt.Errorf(
			"ConfigMap %s/%s has no data key %q: the webhook reads its policy settings from it (write {} for the defaults)",
			c.cm.Namespace, c.cm.Name, c.cm.Key))
	}
	raw, err := settings.Decode("data."+c.cm.Key, []byte(*text))
	if err != nil {
		return admission.Errored(req.UID, http.StatusUnprocessableEntity, err)
	}
	validate := c.validate()
	if validate == nil {
		return admission.Errored(req.UID, http.StatusServiceUnavailable, errors.New("the webhook is starting: the policy is not loaded yet"))
	}
	valid, message, err := validate(ctx, raw)
	if err != nil {
		return admission.Errored(req.UID, http.StatusInternalServerError, fmt.Errorf("validate settings: %w", err))
	}
	if !valid {
		return admission.Errored(req.UID, http.StatusUnprocessableEntity, fmt.Errorf(
			"data.%s: %s (the webhook would keep its settings, and a replica started with these would not be ready)",
			c.cm.Key, (&settings.InvalidError{Message: message}).Error()))
	}
	if warnings, _ := settings.SplitRemark(message); warnings != "" {
		allowed.Warnings = []string{warnings}
	}
	return allowed
}

// SetNotReady keeps the handler unready for reason, which /readyz shows
// after "not ready: " and every review is refused with (code 503) until
// Start: a server whose settings the policy refused serves its probes and
// explains itself instead of exiting.
func (h *Handler) SetNotReady(reason string) {
	h.notReady.Store(&reason)
	h.SetReady(false)
}

// notReadyReason is why the handler has no policy to evaluate with.
func (h *Handler) notReadyReason() string {
	if r := h.notReady.Load(); r != nil && h.target.Load() == nil {
		return *r
	}
	return ""
}
