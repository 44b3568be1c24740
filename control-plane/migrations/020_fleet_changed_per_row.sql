-- `fleet_changed` only for rows that changed. A statement trigger fires for statements that
-- match no row, such as the sweep that marks silent machines offline every few seconds, and each
-- of those made every replica's offer index and matcher reload the whole fleet. Row triggers
-- with the old and new values compared notify only on a change; PostgreSQL delivers one
-- notification per transaction for repeats of the same payload.
DROP TRIGGER farms_changed ON farms;
DROP TRIGGER machines_changed ON machines;
DROP TRIGGER machine_gpus_changed ON machine_gpus;

CREATE TRIGGER farms_added_or_removed AFTER INSERT OR DELETE ON farms FOR EACH ROW EXECUTE FUNCTION notify_fleet_changed();
CREATE TRIGGER farms_changed AFTER UPDATE ON farms FOR EACH ROW
  WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION notify_fleet_changed();

CREATE TRIGGER machines_added_or_removed AFTER INSERT OR DELETE ON machines FOR EACH ROW EXECUTE FUNCTION notify_fleet_changed();
-- The offered columns only: heartbeat columns (last_heartbeat_at, gpu_live…) would reload every index constantly.
CREATE TRIGGER machines_changed
  AFTER UPDATE OF farm_id, region_key, status, price_per_gpu_hour_micro_usd, min_billing_seconds,
    benchmark_tier, cuda_version, driver_version, workloads, simulated, verification, drain_requested, cordoned
  ON machines FOR EACH ROW
  WHEN ((OLD.farm_id, OLD.region_key, OLD.status, OLD.price_per_gpu_hour_micro_usd, OLD.min_billing_seconds, OLD.benchmark_tier,
         OLD.cuda_version, OLD.driver_version, OLD.workloads, OLD.simulated, OLD.verification, OLD.drain_requested, OLD.cordoned)
        IS DISTINCT FROM
        (NEW.farm_id, NEW.region_key, NEW.status, NEW.price_per_gpu_hour_micro_usd, NEW.min_billing_seconds, NEW.benchmark_tier,
         NEW.cuda_version, NEW.driver_version, NEW.workloads, NEW.simulated, NEW.verification, NEW.drain_requested, NEW.cordoned))
  EXECUTE FUNCTION notify_fleet_changed();

CREATE TRIGGER machine_gpus_added_or_removed AFTER INSERT OR DELETE ON machine_gpus FOR EACH ROW EXECUTE FUNCTION notify_fleet_changed();
CREATE TRIGGER machine_gpus_changed AFTER UPDATE ON machine_gpus FOR EACH ROW
  WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION notify_fleet_changed();
