package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
)

func ExampleEngine_Invoke() {
	ctx := context.Background()
	wasm, err := os.ReadFile("testdata/echo.wasm")
	if err != nil {
		log.Fatal(err)
	}
	// New compiles the module, starts one instance and checks that the
	// module speaks Kubewarden protocol v1.
	e, err := engine.New(ctx, wasm, engine.Options{MaxInstances: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close(ctx)

	out, err := e.Invoke(ctx, "echo", []byte("hello"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(out))
	// Output: hello
}

func ExampleEngine_ValidateSettings() {
	ctx := context.Background()
	wasm, err := os.ReadFile("testdata/echo.wasm")
	if err != nil {
		log.Fatal(err)
	}
	e, err := engine.New(ctx, wasm, engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close(ctx)

	res, err := e.ValidateSettings(ctx, []byte(`{"bypassAuth":false}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("valid=%v\n", res.Valid)
	// Output: valid=true
}

// A trapping guest costs its instance, not the engine: the next invocation
// runs on a fresh instance.
func ExampleErrTrap() {
	ctx := context.Background()
	wasm, err := os.ReadFile("testdata/trap.wasm")
	if err != nil {
		log.Fatal(err)
	}
	e, err := engine.New(ctx, wasm, engine.Options{MaxInstances: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close(ctx)

	_, err = e.Validate(ctx, []byte(`{}`))
	fmt.Println(errors.Is(err, engine.ErrTrap), e.Stats().Replacements)

	version, err := e.ProtocolVersion(ctx)
	fmt.Println(version, err)
	// Output:
	// true 1
	// v1 <nil>
}
