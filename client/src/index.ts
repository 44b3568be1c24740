/** The customer client library and the gf CLI land here with the [Execution] issue. */
export {};
