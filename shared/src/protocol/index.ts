export * from './assignment.js';
