package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/yunikorn-userinfo/userinfo/host/admission"
	"github.com/yunikorn-userinfo/userinfo/host/engine"
)

// runFlags are the flags of `run`.
type runFlags struct {
	evalFlags
	monitor      bool
	printRequest bool
}

func newRunCommand(a *app) *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run [MODULE] (-r REQUEST | --object FILE --user USER [--group GROUP]...) [-s SETTINGS | --settings-json JSON]",
		Short: "Evaluate an admission request with a policy, like kwctl run",
		Long: `Evaluate one admission request with a Kubewarden waPC policy and print the
AdmissionResponse as one line of JSON on stdout, as kwctl run does.

MODULE is a local .wasm file (a file:// prefix is accepted); without it the
embedded yunikorn-user-info policy is used. The request may be a bare
AdmissionRequest or a full AdmissionReview (-r), or be built from an object
manifest and its submitter (--object, --user, --group) as the API server
would send it: kind and resource from the object's apiVersion and kind, the
namespace filled in, system:authenticated (and a service account's groups)
added, the options of --operation, a fresh uid. The object is taken as
written: no defaulting, no built-in admission plugin. --print-request
prints that AdmissionReview instead of evaluating it. The settings are
validated with the policy's validate_settings first; invalid settings are
an error.

A failed evaluation (guest error, trap, timeout) is not an error of the
command: like kwctl, it prints a response with allowed false and code 500.
With --monitor, a refusal is printed as monitor mode (serve --monitor)
answers it: allowed, the object unchanged, with the warning "monitor mode:
would be refused: <message>"; a log line on stderr names the submitter, the
claimed identity and the rule.

Logs go to stderr; use -v to see the policy's own log lines.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runRun(cmd.Context(), args, f)
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&f.monitor, "monitor", false, "monitor mode: print a refusal as an admission of the unchanged object, with a warning")
	cmd.Flags().BoolVar(&f.printRequest, "print-request", false, "with --object: print the AdmissionReview built instead of evaluating it")
	return cmd
}

func (a *app) runRun(ctx context.Context, args []string, f *runFlags) error {
	if f.printRequest {
		return a.printRequest(&f.evalFlags)
	}
	s, err := a.openEval(ctx, args, &f.evalFlags)
	if err != nil {
		return err
	}
	defer s.eng.Close(context.WithoutCancel(ctx))
	resp := evaluate(ctx, s.logger, s.eng, s.in)
	if f.monitor {
		resp = monitor(ctx, s.logger, s.in.request, resp)
	}
	out, err := admission.Marshal(resp)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "%s\n", out)
	return err
}

// evaluate runs validate and builds the AdmissionResponse. Failures of the
// evaluation itself become an errored response (code 500), as kwctl and
// policy-server report them.
func evaluate(ctx context.Context, logger *slog.Logger, eng *engine.Engine, in *evalInputs) *admission.Response {
	req := in.request
	resp, err := admission.Evaluate(ctx, eng.Validate, req, in.settings)
	if err != nil {
		logger.WarnContext(ctx, "evaluation failed", "uid", req.UID, "error", err)
		return resp
	}
	logger.DebugContext(ctx, "request evaluated", "uid", req.UID, "kind", req.Kind.Kind,
		"operation", req.Operation, "allowed", resp.Allowed, "mutated", resp.Patch != nil)
	return resp
}

// monitor is resp as monitor mode answers it (admission.Monitor), logging
// a refusal it admits with the submitter, the claimed identity and the
// rule the policy reported in its audit annotations.
func monitor(ctx context.Context, logger *slog.Logger, req *admission.Request, resp *admission.Response) *admission.Response {
	out, admitted := admission.Monitor(resp)
	if admitted {
		msg := ""
		if resp.Status != nil {
			msg = resp.Status.Message
		}
		logger.WarnContext(ctx, "monitor mode: would be refused", "uid", req.UID, "kind", req.Kind.Kind,
			"operation", req.Operation, "user", req.UserName, "claimed", resp.AuditAnnotations["claimed"],
			"rule", resp.AuditAnnotations["rule"], "message", msg)
	}
	return out
}

// printRequest prints the AdmissionReview --object builds, as JSON that
// -r reads back.
func (a *app) printRequest(f *evalFlags) error {
	if f.manifest.objectPath == "" {
		return errors.New("--print-request goes with --object: it prints the review built from the manifest (with -r, the file is the review)")
	}
	if err := f.checkSource(f.flags); err != nil {
		return err
	}
	review, err := manifestReview(&f.manifest)
	if err != nil {
		return err
	}
	out, err := json.MarshalIndent(review, "", "  ")
	if err != nil {
		return fmt.Errorf("print the request: %w", err)
	}
	_, err = fmt.Fprintf(a.stdout, "%s\n", out)
	return err
}
