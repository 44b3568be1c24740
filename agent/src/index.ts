/** The farm agent (gf-agent) lands here with the [Agent] issue. */
export {};
