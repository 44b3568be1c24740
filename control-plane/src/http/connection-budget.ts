import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { ApiError } from '@gpufarm/shared';
import type { FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { sendApiError } from './envelope.js';

/**
 * Connection budgets on the one listener (docs/decisions.md, "Connection budgets"). The server
 * takes `maxConnections` sockets in all (the kernel accept path closes more); customers, which
 * is every socket but an agent's, hold at most `maxConnections - agentReserved` of them, so the
 * agents' share stays free for their links and uploads whatever customers open. A socket
 * counts by what it carries: a machine's authenticated link or request makes it an agent's,
 * anything else a customer's, again at each request (a balancer may reuse a connection for
 * someone else's). Sockets that have not yet carried a request count in the total only: their
 * head must arrive within GF_HEADERS_TIMEOUT_MS, and an agent upgrade is bounded on its own
 * (`agent-gateway/gateway.ts`).
 */
export interface ConnectionBudget {
  /** The socket carries an agent's link or machine-token request: it takes from no customer share. */
  admitAgent(socket: Duplex): void;
  /** The socket carries a customer request; false (and not counted) when the customers' share is full. */
  admitCustomer(socket: Duplex): boolean;
  /** Sockets of each kind open now. */
  counts(): { customer: number; agent: number };
  /** How many sockets customers may hold. */
  readonly customerMax: number;
}

type Holder = 'customer' | 'agent';

/**
 * The budget of `server`'s sockets. Only sockets the server accepted are counted: `inject()`
 * requests, which have none, are always admitted.
 */
export function createConnectionBudget(server: Server, options: { customerMax: number }): ConnectionBudget {
  const accepted = new WeakSet<Duplex>();
  const holders = new WeakMap<Duplex, Holder>();
  const open = { customer: 0, agent: 0 };
  server.on('connection', (socket: Socket) => {
    accepted.add(socket);
    socket.once('close', () => {
      const holder = holders.get(socket);
      if (holder) open[holder] -= 1;
    });
  });
  const hold = (socket: Duplex, holder: Holder) => {
    const before = holders.get(socket);
    if (before === holder) return;
    if (before) open[before] -= 1;
    holders.set(socket, holder);
    open[holder] += 1;
  };
  return {
    customerMax: options.customerMax,
    admitAgent(socket) {
      if (accepted.has(socket) && !socket.destroyed) hold(socket, 'agent');
    },
    admitCustomer(socket) {
      if (!accepted.has(socket) || socket.destroyed || holders.get(socket) === 'customer') return true;
      if (open.customer >= options.customerMax) return false;
      hold(socket, 'customer');
      return true;
    },
    counts: () => ({ ...open }),
  };
}

/** Seconds a customer refused for want of a connection waits before it tries again. */
const BUDGET_RETRY_SECONDS = 5;

declare module 'fastify' {
  interface FastifyInstance {
    /** The listener's connection budgets (`http/connection-budget.ts`); the agent gateway counts its links in it. */
    connectionBudget: ConnectionBudget;
  }
}

/**
 * Installs the budget on the app's server: `maxConnections` in all, `agentReserved` of them
 * never held by customers. A customer request that would pass the customers' share is answered
 * 503 `unavailable` with Retry-After and the connection closed; a balancer's probe is answered
 * as usual and its connection closed. Machine-token routes are counted once their token is
 * checked (`request.machine`): a request without a valid one is a customer's.
 */
export const connectionBudget = fp<{ maxConnections: number; agentReserved: number }>(
  async (app, options) => {
    app.server.maxConnections = options.maxConnections;
    const budget = createConnectionBudget(app.server, { customerMax: options.maxConnections - options.agentReserved });
    app.decorate('connectionBudget', budget);

    /** Admits the request's socket as a customer's; false when it was answered 503 instead. */
    const admitCustomer = (request: FastifyRequest, reply: FastifyReply): boolean => {
      if (budget.admitCustomer(request.raw.socket)) return true;
      reply.header('Connection', 'close');
      // A probe is answered: a balancer that saw 503 would take the replica, and its agent links, out.
      if (request.routeOptions.config.probe) return true;
      const err = new ApiError('unavailable', `This server holds as many customer connections as it takes (${budget.customerMax}); retry after ${BUDGET_RETRY_SECONDS} s.`, {
        headers: { 'Retry-After': String(BUDGET_RETRY_SECONDS) },
      });
      // Sent here rather than thrown: a full share is no server error to log at each refusal.
      sendApiError(request, reply, err);
      return false;
    };

    // Callback hooks: one that answers does not call done, which ends the request there.
    // Before credentials are read: a refused customer costs no database round trip.
    app.addHook('onRequest', (request, reply, done) => {
      if (request.routeOptions.config.auth === 'machine' || admitCustomer(request, reply)) done();
    });
    // After `resolveCredentials` checked the machine token (onRequest).
    app.addHook('preParsing', (request, reply, payload, done) => {
      if (request.routeOptions.config.auth !== 'machine') return done(null, payload);
      if (request.machine) budget.admitAgent(request.raw.socket);
      else if (!admitCustomer(request, reply)) return;
      done(null, payload);
    });
  },
  { name: 'gpufarm-connection-budget' },
);
