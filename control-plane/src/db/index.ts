/** The database as other packages use it (`@gpufarm/control-plane/db`): open, migrate, a local PostgreSQL. */
export * from './database.js';
export * from './migrate.js';
export * from './open.js';
export * from './postgres.js';
