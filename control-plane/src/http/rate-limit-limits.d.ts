export interface Limit {
    name: string;
    max: number;
    windowMs: number;
}
/** The spec's Limits table. */
export declare const LIMITS: {
    readonly perKey: {
        readonly name: "key";
        readonly max: 300;
        readonly windowMs: 60000;
    };
    readonly anonymous: {
        readonly name: "anonymous";
        readonly max: 60;
        readonly windowMs: 60000;
    };
    readonly jobs_create: {
        readonly name: "jobs_create";
        readonly max: 30;
        readonly windowMs: 60000;
    };
    readonly fund_confirm: {
        readonly name: "fund_confirm";
        readonly max: 30;
        readonly windowMs: 60000;
    };
    readonly artifact_download: {
        readonly name: "artifact_download";
        readonly max: 120;
        readonly windowMs: 60000;
    };
};
