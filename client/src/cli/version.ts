/** The client package's version, kept equal to client/package.json (a test compares them). */
export const VERSION = '0.1.0';
