-- A completed checkout (a credit_ledger row) becomes a `checkout.completed` message for the buyer's endpoints.
create or replace function webhook_checkout_completed() returns trigger language plpgsql as $$
begin
  if exists (select 1 from webhook_endpoints e where e.owner_id = new.owner_id and not e.disabled) then
    perform webhook_enqueue(new.owner_id, null, 'checkout.completed',
      jsonb_build_object('session_id', new.checkout_session_id, 'amount_usd', new.amount_usd));
  end if;
  return null;
end
$$;
create or replace trigger webhook_checkout_completed after insert on credit_ledger
  for each row execute function webhook_checkout_completed();
