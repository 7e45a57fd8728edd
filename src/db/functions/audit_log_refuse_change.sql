-- audit_log is append-only as a property of the database: UPDATE and DELETE are refused for everyone,
-- the table owner included. TRUNCATE stays possible on purpose (the tests empty every table; only the
-- owner may truncate); docs/administration.md says how a deployment forbids it too.
create or replace function audit_log_refuse_change() returns trigger language plpgsql as $$
begin
  raise exception 'audit_log is append-only: % is not allowed', tg_op
    using errcode = 'insufficient_privilege';
end;
$$;
create or replace trigger audit_log_append_only before update or delete on audit_log
  for each row execute function audit_log_refuse_change();
