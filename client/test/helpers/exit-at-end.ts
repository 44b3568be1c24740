// Preloaded into the client's test files on its oldest Node (scripts/run-tests.sh): once the file is
// done and Node has emitted 'exit', leave at once rather than through Node's own teardown, which on
// 20.11 can spin forever running FinalizationRegistry cleanups that the HTTP client registered
// (nodejs/node#47748; the same hang `gf` avoids in client/src/cli/main.ts). 'beforeExit' comes after
// every other 'exit' listener is in place (tap's, its process info's), so this one runs last.
process.once('beforeExit', () => {
  process.once('exit', (code) => process.exit(code));
});
