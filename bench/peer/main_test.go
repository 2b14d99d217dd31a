package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	ykadmission "github.com/apache/yunikorn-k8shim/pkg/admission"
	ykconf "github.com/apache/yunikorn-k8shim/pkg/admission/conf"
	yklog "github.com/apache/yunikorn-k8shim/pkg/log"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/host/settings"
	"github.com/yunikorn-userinfo/userinfo/host/webhook"
)

// devNull receives the logs of the logged variants, so that they cost what
// writing a log line costs without flooding the benchmark output.
var devNull *os.File

func TestMain(m *testing.M) {
	var err error
	devNull, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open /dev/null:", err)
		os.Exit(1)
	}
	// YuniKorn's logger is built once per process, on first use, writing to
	// whatever os.Stdout is then ("stdout" is its only output). Build it
	// now with os.Stdout pointing at /dev/null, then restore os.Stdout for
	// the test and benchmark output.
	stdout := os.Stdout
	os.Stdout = devNull
	yklog.Log(yklog.Admission).Info("benchmark: YuniKorn logs go to " + os.DevNull)
	os.Stdout = stdout

	code := m.Run()
	_ = devNull.Close()
	os.Exit(code)
}

// Implementation names, the impl= part of the benchmark names.
const (
	implOurs     = "ours"
	implYuniKorn = "yunikorn"
)

// The fixtures: testdata/bench/<object>-<case>.json, in this order.
var (
	fixtureObjects = []string{"pod-small", "pod-large", "deployment"}
	fixtureCases   = []string{"create-inject", "create-present", "update-unchanged"}
)

// fixture is one shared AdmissionReview.
type fixture struct {
	name      string // <object>-<case>
	object    string
	caseName  string
	body      []byte
	uid       string
	operation string
}

// loadFixtures reads the nine shared fixtures.
func loadFixtures(tb testing.TB) []fixture {
	tb.Helper()
	var all []fixture
	for _, object := range fixtureObjects {
		for _, c := range fixtureCases {
			name := object + "-" + c
			body, err := os.ReadFile(filepath.Join("..", "..", "testdata", "bench", name+".json"))
			require.NoError(tb, err, "read fixture (regenerate with `cd bench && go run ./cmd/benchfixtures`)")
			var review struct {
				Request struct {
					UID       string `json:"uid"`
					Operation string `json:"operation"`
				} `json:"request"`
			}
			require.NoError(tb, json.Unmarshal(body, &review), "decode fixture %s", name)
			require.NotEmpty(tb, review.Request.UID, "fixture %s has a uid", name)
			all = append(all, fixture{name: name, object: object, caseName: c, body: body,
				uid: review.Request.UID, operation: review.Request.Operation})
		}
	}
	return all
}

// logging selects how much the implementations log.
type logging int

const (
	// quiet: no admission logs at all on either side (ours: a discarding
	// logger and no metrics; YuniKorn: log.level FATAL).
	quiet logging = iota
	// shipped: each logs as it does by default, into /dev/null. Ours: one
	// JSON line per admission at info, as `serve` does, plus its Prometheus
	// metrics. YuniKorn: its console logger at INFO (several lines per
	// admission; YuniKorn has no admission metrics).
	shipped
)

// impl is one implementation under comparison.
type impl struct {
	name    string
	handler http.Handler
}

// newOurs builds our webhook the way `serve` does, without TLS and network.
func newOurs(tb testing.TB, mode logging) impl {
	return newOursWith(tb, mode, nil)
}

// newOursWith is newOurs with the engine wrapped by wrap (nil: as is).
func newOursWith(tb testing.TB, mode logging, wrap func(webhook.Policy) webhook.Policy) impl {
	tb.Helper()
	ctx := tb.Context()
	path := os.Getenv("POLICY_WASM")
	if path == "" {
		path = filepath.Join("..", "..", "cmd", "yunikorn-userinfo", "policy.wasm")
	}
	module, err := os.ReadFile(path)
	require.NoError(tb, err, "read policy module")

	logger := slog.New(slog.DiscardHandler)
	if mode == shipped {
		logger = slog.New(slog.NewJSONHandler(devNull, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	instances := runtime.GOMAXPROCS(0) // serve's --instances default
	e, err := engine.New(ctx, module, engine.Options{
		Logger:       logger.With("component", "policy"),
		MaxInstances: instances,
	})
	require.NoError(tb, err, "compile policy module")
	tb.Cleanup(func() { _ = e.Close(context.WithoutCancel(ctx)) })

	validate := func(ctx context.Context, raw json.RawMessage) (bool, string, error) {
		sv, err := e.ValidateSettings(ctx, raw)
		return sv.Valid, sv.Message, err
	}
	valid, message, err := validate(ctx, settings.Empty)
	require.NoError(tb, err, "validate settings")
	require.True(tb, valid, "settings {} accepted: %s", message)
	store, err := settings.NewStore(settings.Empty, settings.Options{Validate: validate})
	require.NoError(tb, err, "settings store")

	opts := webhook.Options{Logger: logger}
	if mode == shipped {
		opts.Metrics, err = webhook.NewMetrics(prometheus.NewRegistry(), e.Stats, instances, "bench")
		require.NoError(tb, err, "register metrics")
	}
	h := webhook.NewHandler(opts)
	var policy webhook.Policy = e
	if wrap != nil {
		policy = wrap(e)
	}
	h.Start(policy, store.Current)
	return impl{name: implOurs, handler: h}
}

// yunikornLock serialises the construction of YuniKorn controllers: the log
// level is process-wide and every configuration load sets it.
var yunikornLock sync.Mutex

// newYuniKorn builds YuniKorn's admission controller the way its main
// (pkg/cmd/admissioncontroller) does, minus the Kubernetes client and
// informers, and routes requests the way that main's WebHook.Startup does.
//
// The configuration maps are absent (every setting at its default) except,
// for the quiet mode, log.level. YuniKorn's logger is process-wide, so the
// last controller built sets the level for all of them.
func newYuniKorn(tb testing.TB, mode logging) impl {
	tb.Helper()
	yunikornLock.Lock()
	defer yunikornLock.Unlock()

	level := "INFO" // YuniKorn's default
	if mode == quiet {
		level = "FATAL"
	}
	// Index 0 is yunikorn-defaults, index 1 yunikorn-configs.
	configMaps := []*v1.ConfigMap{nil, {Data: map[string]string{"log.level": level}}}
	conf := ykconf.NewAdmissionControllerConf(configMaps)
	pcCache, err := ykadmission.NewPriorityClassCache(nil)
	require.NoError(tb, err, "priority class cache")
	nsCache, err := ykadmission.NewNamespaceCache(nil)
	require.NoError(tb, err, "namespace cache")
	ac := ykadmission.InitAdmissionController(conf, pcCache, nsCache)

	mux := http.NewServeMux()
	mux.HandleFunc("/health", ac.Health)
	mux.HandleFunc("/mutate", ac.Serve)
	mux.HandleFunc("/validate-conf", ac.Serve)
	return impl{name: implYuniKorn, handler: mux}
}

// admit sends body to h as the API server would (POST /mutate, JSON) and
// returns the recorded answer.
func admit(h http.Handler, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/mutate?timeout=10s", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// answer is the part of an AdmissionReview response the checks look at.
type answer struct {
	UID       string  `json:"uid"`
	Allowed   bool    `json:"allowed"`
	PatchType *string `json:"patchType"`
	Patch     []byte  `json:"patch"`
	Status    *struct {
		Message string `json:"message"`
		Code    int32  `json:"code"`
	} `json:"status"`
}

// decodeAnswer checks the envelope of an answer and returns its response.
func decodeAnswer(tb testing.TB, rec *httptest.ResponseRecorder) answer {
	tb.Helper()
	require.Equal(tb, http.StatusOK, rec.Code, "HTTP status; body: %s", rec.Body)
	var review struct {
		APIVersion string  `json:"apiVersion"`
		Kind       string  `json:"kind"`
		Response   *answer `json:"response"`
	}
	require.NoError(tb, json.Unmarshal(rec.Body.Bytes(), &review), "answer is JSON: %s", rec.Body)
	require.Equal(tb, "admission.k8s.io/v1", review.APIVersion)
	require.Equal(tb, "AdmissionReview", review.Kind)
	require.NotNil(tb, review.Response, "answer has a response: %s", rec.Body)
	return *review.Response
}

// verdict is what an implementation answers to a fixture, in short.
type verdict struct {
	allowed bool
	patched bool
}

// expectedVerdict is each implementation's verdict on each case with
// default settings. YuniKorn refuses create-present: alice is not a
// trusted submitter (systemUsers, externalUsers, externalGroups) and it
// does not accept her own value either (docs/BEHAVIOUR.md §4.1, rule 2, is ours).
func expectedVerdict(implName, caseName string) verdict {
	switch {
	case caseName == "create-inject":
		return verdict{allowed: true, patched: true}
	case caseName == "create-present" && implName == implYuniKorn:
		return verdict{allowed: false}
	default:
		return verdict{allowed: true}
	}
}

// checkAnswer sends fx once and checks the answer against expectedVerdict:
// status 200, the uid echoed, allowed, and a JSONPatch exactly when
// expected.
func checkAnswer(tb testing.TB, im impl, fx fixture) answer {
	tb.Helper()
	got := decodeAnswer(tb, admit(im.handler, fx.body))
	want := expectedVerdict(im.name, fx.caseName)
	require.Equal(tb, fx.uid, got.UID, "uid echoed")
	require.Equal(tb, want.allowed, got.Allowed, "allowed; status: %+v", got.Status)
	if want.patched {
		require.NotEmpty(tb, got.Patch, "patch")
		require.NotNil(tb, got.PatchType, "patchType")
		require.Equal(tb, "JSONPatch", *got.PatchType)
	} else {
		require.Empty(tb, got.Patch, "no patch")
	}
	return got
}
