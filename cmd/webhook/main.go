// Command spreadguard-webhook is the admission webhook that enforces pod
// topology spread at pod creation.
package main

import (
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/spreadguard/spreadguard/cmd/webhook/app"
)

func main() {
	if err := app.NewServerCommand(ctrl.SetupSignalHandler()).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "spreadguard-webhook:", err)
		os.Exit(1)
	}
}
