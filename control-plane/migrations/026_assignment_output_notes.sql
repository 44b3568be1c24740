-- What the agent said of the output rules in its `finished` report (protocol 5,
-- `assignment.status.outputNotes`): an output not stored because it was over its limit or its
-- files could not be packed, or stored without the special files it names. Kept with the other
-- facts of the report, since settlement (and the job's log lines it writes) may run later.
ALTER TABLE assignments ADD COLUMN output_notes jsonb;
