// Package client is the small HTTP client of allot's public API, and the
// wire types it exchanges with `allot server`. The CLI talks to the server
// only through it. It holds no state and imports nothing else of allot's
// but the pure budgets package, for the Ratio JSON form the two share.
package client
