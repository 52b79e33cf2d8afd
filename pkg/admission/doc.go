// Package admission holds spreadguard's controller-runtime admission
// handlers and the HTTP endpoint that serves them.
//
// The handlers decode the object under review, call pkg/engine (the same
// pipeline kubectl-spread runs offline) and turn its decision into an
// answer: a patch, an allow (possibly with warnings), a denial, or an error.
// The three kinds of outcome stay distinct: a pod whose hard constraints
// cannot be met is Denied, and only that is ever a refusal for a spread
// reason; a fault inside the webhook (a failed lookup, an engine error, a
// panic) is answered as the webhook's failurePolicy says, admitted with a
// warning under Ignore and refused as spreadguard's own error under Fail,
// and counted; a request that cannot be decoded is an HTTP 400, which the
// API server treats as a failed call.
package admission
